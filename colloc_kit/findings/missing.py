"""The cells of the study's matrix the data lacks or whose jobs failed (`missing_cells`), with the evidence each
gives on memory kept apart: a cell the kit's fit check held back before running was predicted not to fit (it never
ran, `PREDICTED`); a cell whose jobs ran out of memory was observed (`OUT_OF_MEMORY`).

    >>> cells, _ = configurations(results, "seed-33")                     # doctest: +SKIP
    >>> missing_cells(cells, not_run)                                     # doctest: +SKIP
"""

from __future__ import annotations

import re

import pandas as pd

from colloc_kit.analysis.figures import MEMORY_MARGIN
from colloc_kit.findings.read import STUDY_33, kind_of
from colloc_kit.gpu.mig_catalogue import resolve
from colloc_kit.spec import AMP_CHOICES

__all__ = ["PREDICTED", "OUT_OF_MEMORY", "missing_cells", "with_margin"]

PREDICTED, OUT_OF_MEMORY = "not run, predicted not to fit", "ran out of memory"


def missing_cells(cells: pd.DataFrame, not_run: pd.DataFrame | None = None, fit: pd.DataFrame | None = None,
                  gpu: str = "H100-80GB", study: list = STUDY_33) -> pd.DataFrame:
    """Per workload of experiment 33, the study's cells the data lacks (with the reason where the experiment's
    not-run list gives one, or where `fit`, `analysis.memory_fit` on `gpu`'s capacities, says its jobs cannot fit),
    the cells whose jobs ran out of memory and those whose jobs failed otherwise (means over repeats)."""
    skipped = _skipped(not_run, cells["experiment"].iloc[0] if len(cells) else "seed-33")
    rows = [{"workload": "any", "kind": kind, "copies": copies, "layout": layout or "", "state": "not run"}
            for kind, copies, layout in study] if cells.empty else []
    for workload, group in cells.groupby("workloads", sort=True):
        present = {(k, int(c), lay) for k, c, lay in zip(group["kind"], group["copies"], group["layout"])}
        first = group.iloc[0]
        for kind, copies, layout in study:
            if (kind, copies, layout or "") not in present:
                why = _why_skipped(skipped, first, (kind, copies, layout or "")) \
                    or _too_big(fit, workload, copies, layout, gpu)
                rows.append({"workload": workload, "kind": kind, "copies": copies, "layout": layout or "",
                             "state": f"{PREDICTED}: {with_margin(why)}" if why else "not run"})
        for _, row in group[group["failed_jobs_mean"].fillna(0) > 0].iterrows():
            oom, failed, jobs = (row[f"{e}_mean"] for e in ("out_of_memory_jobs", "failed_jobs", "jobs"))
            state = f"{OUT_OF_MEMORY}: {oom:.0f} of {jobs:.0f} jobs" if oom else \
                f"failed: {failed:.0f} of {jobs:.0f} jobs did not complete ({row['flags'] or 'see the jobs frame'})"
            rows.append({"workload": workload, "kind": row["kind"], "copies": int(row["copies"]),
                         "layout": row["layout"], "state": state})
    return pd.DataFrame(rows, columns=["workload", "kind", "copies", "layout", "state"])


def with_margin(why: str) -> str:
    """A not-run list's reason with the fit check's margin said where an older list left it out (the check kept
    `figures.MEMORY_MARGIN` free then as now).

    >>> with_margin("a 1g partition holds 10,194 MiB; one job needs 10,186 MiB alone")
    'a 1g partition holds 10,194 MiB; one job needs 10,186 MiB alone, 5% kept free'
    """
    said = re.search(r"holds [\d,]+ MiB; one job needs [\d,]+ MiB alone$|the GPU has [\d,]+ MiB$", why)
    return f"{why}, {MEMORY_MARGIN:.0%} kept free" if said else why


def _too_big(fit: pd.DataFrame | None, workload: str, copies: int, layout: str | None, gpu: str) -> str | None:
    """Why `copies` jobs of `workload` cannot fit the card (or one its layout's shares), by their steady footprint
    alone (`fit`: analysis.memory_fit on `capacities(gpu)`); None where they fit or nothing is known."""
    if fit is None or fit.empty:
        return None
    capacity, needed = (f"{gpu} {resolve(layout.split('+')[0], gpu).name}", 1) if layout else (f"{gpu} card", copies)
    found = fit[(fit["workload"] == workload) & (fit["capacity"] == capacity)].dropna(subset=["copies_fit"])
    if found.empty or found["copies_fit"].iloc[0] >= needed:
        return None
    row = found.iloc[0]
    return (f"by its steady footprint alone ({row['steady_gpu_memory_mb']:,.0f} MiB), {_copies(row['copies_fit'])} "
            f"fit in {capacity} ({row['capacity_mb']:,.0f} MiB)")


def _copies(n: float) -> str:
    return f"{int(n)} cop{'y' if int(n) == 1 else 'ies'}"


def _skipped(not_run: pd.DataFrame | None, experiment: str) -> dict[tuple, str]:
    """{(first model, precision, data, kind, copies, layout): why} of the experiment's not-run cells, named as
    'timm.resnet152 bs128 off on imagenet naive x7'; older folders lack the data ('... bs128 off naive x7') or also
    the precision ('timm.resnet152 naive x7'): None in its place."""
    found: dict[tuple, str] = {}
    if not_run is None or not len(not_run):
        return found
    rows = not_run[not_run["experiment"] == experiment]
    for cell, why in zip(rows["cell"], rows["why"]):
        parts = cell.rsplit(" ", 2)
        if len(parts) == 3 and re.fullmatch(r"x\d+", parts[2]):
            jobs, _, data = parts[0].partition(" on ")
            amp = jobs.split()[-1] if jobs.split()[-1] in AMP_CHOICES else None
            kind, layout = kind_of(parts[1].split("(")[0], parts[1])
            found[(jobs.split(" + ")[0].split(" ")[0], amp, data or None, kind, int(parts[2][1:]), layout or "")] = why
    return found


def _why_skipped(skipped: dict[tuple, str], workload: pd.Series, cell: tuple) -> str | None:
    """Why the not-run list says `cell` (kind, copies, layout) of `workload` (a row with model, amp and data) was
    not run: an entry naming its data and precision, else one from an older folder that names fewer."""
    model, amp, data = workload["model"], workload["amp"], workload["data"]
    for key in ((model, amp, data), (model, amp, None), (model, None, None)):
        if key + cell in skipped:
            return skipped[key + cell]
    return None
