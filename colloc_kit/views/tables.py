"""Every table a reader sees goes through this one formatter: notebooks (HTML), reports and docs (Markdown) and the
terminal (text) alike.

    >>> frame = pd.DataFrame({"mode_label": ["naive", "mps"], "copies": [2, 2],
    ...                       "normalized_throughput_mean": [1.5437, 1.8821], "normalized_throughput_ci": [0.14, None],
    ...                       "flags": [None, float("nan")], "input_wait_share_mean": [0.781, 0.5]})
    >>> print(table(frame).to_markdown())
    | mode | copies | gain (x alone) | waiting for data (%) |
    |---|---|---|---|
    | naive | 2 | 1.54 ± 0.14 | 78 % |
    | mps | 2 | 1.88 | 50 % |
    >>> print(table(frame.assign(repeats=1, normalized_throughput_ci=0.0), ["normalized_throughput_mean",
    ...       "normalized_throughput_ci", "repeats"]).to_markdown())
    | gain (x alone) | repeats |
    |---|---|
    | 1.54 (1 repeat, no CI) | 1 |
    | 1.88 (1 repeat, no CI) | 1 |

What it does to a frame: headers for readers (`readable`: units, no underscores); a figure's mean and its 95 % CI in
one cell ("1.54 ± 0.14"; "1.54 (1 repeat, no CI)" where one repeat gives none, never "± 0.00"); shares as
percentages ("78 %"); columns empty in every row left out; numbers as `number` writes them (thousands separated,
three significant digits, never "9.82e-05"); a blank for a missing value, never "nan" or "None"; no index; text
wrapped so that the table stays within the page's width. A table longer than `COLLAPSE_ROWS` rows is collapsed in
HTML under a one-line summary (click to open), so that it can sit below its figure without pushing the page down.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import pandas as pd

__all__ = ["COLLAPSE_ROWS", "HEADERS", "BASELINES_DIFFER", "number", "readable", "cell", "Table", "table",
           "baseline_remark"]

COLLAPSE_ROWS = 12  # longer tables are collapsed in HTML (<details>), under their figure
HEADERS = {  # the kit's columns (without _mean/_ci) as readers call them
    "mode_label": "mode", "jobs_label": "jobs", "workloads": "workload", "n_jobs": "jobs",
    "normalized_throughput": "gain (x alone)", "epoch_time_growth": "epoch time (x alone)",
    "aggregate_images_per_s": "images/s (all jobs)", "relative_throughput": "share of alone speed",
    "bound_by": "bound by", "sm_util_pct": "SM active (%)", "sm_occupancy_pct": "SM occupancy (%)",
    "gpu_util_pct": "GPU busy (%)", "input_wait_share": "waiting for data (%)",
    "gpu_idle_share": "GPU idle (%)", "gpu_busy_share": "GPU busy (%)", "sm_active_share": "SMs active (%)",
    "dram_share": "DRAM bandwidth used (%)", "host_cpu_util_pct": "host CPU busy (%)",
    "energy_per_image_j": "energy per image (J)", "steady_gpu_memory_mb": "steady GPU memory (MB)",
    "peak_memory_mb": "peak memory (MB)", "copies_fit": "copies that fit", "error_kind": "error kind",
    "study_gain": "study's gain (x alone)", "gpu_part": "GPU's part", "host_part": "host's part",  # attribution
    "gpu_only_gain": "GPU-only gain", "attribution_note": "split note", "baseline": "baseline run",
}
BASELINES_DIFFER = 1.25  # one job's lone images/s in two experiments differing more than this is remarked
UNITS = (("_per_s", "/s"), ("_pct", " (%)"), ("_mb", " (MB)"), ("_mib", " (MiB)"), ("_j", " (J)"), ("_s", " (s)"))
STATISTICS = {"_mean": "", "_std": " (sd)", "_ci": " (95 % CI)"}
MISSING_TEXT = {"nan", "none", "nat", "<na>"}  # what str() makes of a missing value: shown blank


def number(value: Any) -> str:
    """How a table shows a value: thousands separated and whole from 100 up, three significant digits below (never
    an exponent), a blank where it is missing.

    >>> number(6620.632486), number(1.27449), number(1.0), number(0.0000982), number(7), number(float("nan"))
    ('6,621', '1.27', '1.00', '0.0000982', '7', '')
    """
    if value is None:
        return ""
    if pd.api.types.is_bool(value):
        return "yes" if value else "no"
    if not isinstance(value, Real):
        return str(value)
    if isinstance(value, Integral):
        return f"{value:,}"
    value = float(value)
    if math.isnan(value):
        return ""
    if math.isinf(value) or abs(value) >= 100:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    text = f"{value:#.3g}"  # three significant digits, trailing zeros kept: 1.00, 2.50, 0.120
    if "e" in text:  # 9.82e-05: written out instead
        text = f"{value:.{2 - math.floor(math.log10(abs(value)))}f}"
    return text


def readable(column: str) -> str:
    """A column name for readers.

    >>> readable("aggregate_images_per_s_mean"), readable("epoch_time_growth_std"), readable("peak_memory_mb")
    ('images/s (all jobs)', 'epoch time (x alone) (sd)', 'peak memory (MB)')
    >>> readable("normalized_throughput_ci"), readable("batch_size"), readable("host_cpu_s")
    ('gain (x alone) (95 % CI)', 'batch size', 'host cpu (s)')
    """
    suffix = ""
    for ending, text in STATISTICS.items():
        if column.endswith(ending):
            column, suffix = column[: -len(ending)], text
            break
    if column in HEADERS:
        return HEADERS[column] + suffix
    unit = next(((ending, text) for ending, text in UNITS if column.endswith(ending)), None)
    if unit:
        column = column[: -len(unit[0])] + unit[1]
    return column.replace("_", " ") + suffix


def cell(value: Any) -> str:
    """One value as text: numbers as `number` writes them, lists joined, missing values blank.

    >>> cell(["3g", "2g"]), cell("None"), cell(pd.NA), cell(2.5)
    ('3g, 2g', '', '', '2.50')
    """
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    if value is None or (not isinstance(value, str) and pd.api.types.is_scalar(value) and pd.isna(value)):
        return ""
    if isinstance(value, str):
        return "" if value.strip().lower() in MISSING_TEXT else value
    return number(value)


@dataclass
class Table:
    """A formatted table (every cell text already) with its three renderings; a notebook shows its HTML."""

    frame: pd.DataFrame  # headers for readers, cells as text
    title: str = ""  # the one-line summary of a collapsed table
    collapse: bool = False  # HTML: folded under `title` (click to open)

    def to_html(self) -> str:
        """The table as HTML that wraps within the page: numbers right-aligned, long text wrapped."""
        numeric = [_numeric(self.frame[c]) for c in self.frame.columns]
        head = "".join(f'<th style="text-align:{"right" if n else "left"};white-space:normal">{html.escape(str(c))}'
                       "</th>" for c, n in zip(self.frame.columns, numeric))
        body = "".join("<tr>" + "".join(
            f'<td style="text-align:{"right" if n else "left"};white-space:{"nowrap" if n else "normal"};'
            f'overflow-wrap:break-word">{html.escape(v)}</td>' for v, n in zip(row, numeric)) + "</tr>"
            for row in self.frame.itertuples(index=False))
        table_html = (f'<div class="ck-table" style="max-width:100%;overflow-x:auto"><table style="font-size:12px;'
                      f'max-width:100%;table-layout:auto"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
                      "</table></div>")
        if not self.collapse:  # its title above it, as the folded one has it in its summary
            title = (f'<div class="ck-table-title" style="font-weight:bold;margin:0.6em 0 0.2em">'
                     f"{html.escape(self.title)}</div>") if self.title else ""
            return title + table_html
        summary = html.escape(self.title or "the table")
        return f"<details><summary>{summary} ({len(self.frame):,} rows: click to open)</summary>{table_html}</details>"

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_markdown(self) -> str:
        """The table as Markdown (pipes in cells escaped)."""
        def row(values: Any) -> str:
            return "| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in values) + " |"

        return "\n".join([row(self.frame.columns), "|" + "---|" * len(self.frame.columns),
                          *(row(r) for r in self.frame.itertuples(index=False))])

    def to_text(self) -> str:
        """The table as aligned plain text, for a terminal."""
        return self.frame.to_string(index=False)

    def __repr__(self) -> str:
        return self.to_text()

    def __len__(self) -> int:
        return len(self.frame)


def table(frame: pd.DataFrame, columns: list[str] | None = None, title: str = "",
          collapse: bool | None = None) -> Table:
    """The frame (or these of its columns; names it lacks are skipped) formatted for reading: see the module.
    `collapse`: fold the HTML under `title`; None folds tables longer than COLLAPSE_ROWS."""
    chosen = [c for c in (columns if columns is not None else list(frame.columns)) if c in frame.columns]
    repeats = frame["repeats"] if "repeats" in frame else pd.Series(math.nan, index=frame.index)
    shown: dict[str, list[str]] = {}
    for column in chosen:
        if column.endswith("_ci") and {column[:-3] + "_mean", column[:-3]} & set(chosen):
            continue  # written beside its value: never a bare half-width in a column of its own
        share = _is_share(column)
        values = [_percent(v) if share else cell(v) for v in _whole(frame[column])]
        ci_column = column.removesuffix("_mean") + "_ci"
        if ci_column != column and ci_column in chosen:
            cis = frame[ci_column] * (100 if share else 1)
            values = [_with_ci(m, c, r) for m, c, r in zip(values, cis, repeats)]
        shown[readable(column)] = values
    if len(frame):  # a column empty in every row says nothing
        shown = {name: values for name, values in shown.items() if any(values)}
    formatted = pd.DataFrame(shown, columns=list(shown))
    return Table(formatted, title, len(formatted) > COLLAPSE_ROWS if collapse is None else collapse)


def _with_ci(mean: str, ci: Any, repeats: Any = math.nan) -> str:
    """'1.54 ± 0.14': the CI to as many decimals as the mean shows (one repeat's own CI, over its steps, too);
    '1.54 (1 repeat, no CI)' where one repeat gives none (or a CI of 0); the mean alone where the CI is missing."""
    one = not (cell(ci) and float(ci) > 0) and (cell(repeats) == "1" or (cell(ci) and float(ci) == 0))
    if mean and one:
        return f"{mean} (1 repeat, no CI)" if cell(repeats) in ("1", "") else f"{mean} (no CI)"
    if not mean or not cell(ci):
        return mean
    number_part, _, unit = mean.partition(" ")
    decimals = len(number_part.partition(".")[2])
    return f"{number_part} ± {float(ci):,.{decimals}f}{' ' + unit if unit else ''}"


def _is_share(column: str) -> bool:
    """Whether a column holds a share (0 to 1) that a reader reads as a percentage."""
    base = column.removesuffix("_mean").removesuffix("_std").removesuffix("_ci")
    return base.endswith("_share")


def _percent(value: Any) -> str:
    """A share as a percentage: 0.781 -> '78 %'; blank where missing."""
    return "" if cell(value) == "" else f"{100 * float(value):.0f} %"


def _whole(column: pd.Series) -> pd.Series:
    """A float column of whole numbers (copies, counts: float where a value is missing) as whole numbers."""
    if pd.api.types.is_float_dtype(column) and column.notna().any():
        filled = column.dropna()
        if ((filled % 1) == 0).all() and filled.abs().max() < 2**53:
            return column.astype("Int64")
    return column


def _numeric(column: pd.Series) -> bool:
    """Whether a formatted column holds numbers (right-aligned)."""
    filled = [v for v in column if v]
    return bool(filled) and all(v.replace(",", "").replace(".", "").replace(" ± ", "").replace("-", "").isdigit()
                                for v in filled)


def baseline_remark(summary: pd.DataFrame, limit: float = BASELINES_DIFFER) -> str | None:
    """A sentence where one job's lone run measured different images/s in different experiments (each experiment's
    gains are against its own), for the workload that differs most; None where none differs more than `limit`.

    >>> summary = pd.DataFrame({"experiment": ["02", "03", "07"], "mode": ["exclusive"] * 3, "copies": [1, 1, 1],
    ...     "workloads": ["smallcnn bs8"] * 3, "aggregate_images_per_s_mean": [1059.0, 1989.0, 1921.0]})
    >>> baseline_remark(summary)[:94]
    'the lone run of smallcnn bs8 measured 1,059 / 1,989 / 1,921 images/s in experiments 02, 03, 07'
    """
    needed = {"experiment", "mode", "copies", "workloads", "aggregate_images_per_s_mean"}
    if not needed <= set(summary.columns):
        return None
    alone = summary[(summary["mode"] == "exclusive") & (summary["copies"] == 1)].dropna(
        subset=["aggregate_images_per_s_mean"])
    worst, spread = None, limit
    for workload, rows in alone.groupby("workloads", sort=True):
        rates = rows.groupby("experiment", sort=True)["aggregate_images_per_s_mean"].mean()
        if len(rates) > 1 and rates.min() > 0 and rates.max() / rates.min() > spread:
            worst, spread = (workload, rates), rates.max() / rates.min()
    if worst is None:
        return None
    workload, rates = worst
    return (f"the lone run of {workload} measured {' / '.join(number(r) for r in rates)} images/s in experiments "
            f"{', '.join(map(str, rates.index))} ({spread:.2f}x apart): each experiment's gains are against its own")
