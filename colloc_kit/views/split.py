"""The split of each gain as a figure: what the copies' extra loader workers gave (the host's part) and what sharing
the GPU gave (the GPU's part), per collocated cell, on a log axis where the two parts add up to the study's gain.

    >>> from colloc_kit import analysis, reference
    >>> fig = gain_split(analysis.summarize(reference.load("h100-attribution")))
    >>> [trace.name for trace in fig.data]
    ["host's part", "GPU's part", "study's gain (95 % CI)", 'GPU-only gain (no input pipeline)']
    >>> split_reading(analysis.summarize(reference.load("h100-attribution"))).split("; ")[1]
    "r26-fp32 mps x3: study's gain 1.80 = host's part 1.44 x GPU's part 1.25 (the host: 62 % of it, in log terms)"

`docs/attribution.md` defines the figures (`colloc_kit.analysis.attribution`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from colloc_kit.views.style import PALETTE, empty

__all__ = ["gain_split", "split_cells", "split_reading"]

HOST, GPU, MARK = PALETTE[1], PALETTE[0], "#222222"
NOT_NAMING = re.compile(r"timm\.| bs\d+| seed")  # the parts of a jobs label a cell's name leaves out
COPIES = re.compile(r"^\d+ x ")  # a cell of copies: its copies name it once, after its way of sharing


def split_cells(summary: pd.DataFrame, only: Sequence[str] = ()) -> pd.DataFrame:
    """The collocated cells of `summarize`'s frame that have the split (a GPU's part), each with a `cell` label
    ('r26-fp32 mps x3'; by workload where one experiment holds several, 'resnet26 bf16 on cifar10 mps x3', a mix by
    its jobs, 'resnet152 on imagenet + 2 x resnet26 on cifar10 naive') and
    `host_share` (log host's part / log study's gain; NaN where the gain is not above 1); with `only`, those cells in
    that order.

    >>> from colloc_kit import reference
    >>> h200 = reference.summary("h200-141gb")                  # analysis.summarize of its runs, kept
    >>> split_cells(h200, ["resnet50 on imagenet64 naive x3"])["gpu_part_mean"].round(2).tolist()
    [0.96]
    """
    if "gpu_part_mean" not in summary:
        return summary.iloc[0:0]
    cells = summary[summary["gpu_part_mean"].notna()].copy()
    cells["cell"] = [f"{e} {m} x{int(c)}" for e, m, c in zip(cells["experiment"], cells["mode"], cells["copies"])]
    if cells["cell"].duplicated().any():  # e.g. a seed set: experiment 33's workloads, precisions and partitions
        cells["cell"] = [f"{NOT_NAMING.sub('', j)} {m}" if " + " in j else
                         f"{NOT_NAMING.sub('', COPIES.sub('', j))} {m} x{int(c)}"
                         for j, m, c in zip(cells["jobs_label"], cells["mode_label"], cells["copies"])]
    cells["host_share"] = [math.log(h) / math.log(g) if g > 1 else math.nan
                           for h, g in zip(cells["host_part_mean"], cells["study_gain_mean"])]
    named = set(cells["cell"])
    unknown = [name for name in only if name not in named]
    if unknown:
        raise ValueError(f"no cell with the split called {', '.join(map(repr, unknown))}; the cells: "
                         f"{', '.join(cells['cell'])}")
    return (cells.set_index("cell").loc[list(only)].reset_index() if only else cells).reset_index(drop=True)


def gain_split(summary: pd.DataFrame, title: str = "Is it the GPU or the host? Each gain split",
               only: Sequence[str] = ()) -> go.Figure:
    """Per cell (or the cells named in `only`) a bar from 1 to the host's part (orange), then on to the study's gain
    (blue: the GPU's part; drawn leftwards where sharing the GPU lost), on a log axis; the study's gain with its 95 %
    CI (black), and where the cell would end had the GPU gained its GPU-only gain (open diamond; past it where the
    host-matched job still waited for input, which makes the GPU's part an upper bound)."""
    cells = split_cells(summary, only)
    if cells.empty:
        return empty(title, "no cell with a host-matched baseline (ask for baselines: [configured, host-matched, "
                            "gpu-only] in the spec)")
    host, gpu, study = cells["host_part_mean"], cells["gpu_part_mean"], cells["study_gain_mean"]
    ci, ceiling = cells["study_gain_ci"].fillna(0), host * cells["gpu_only_gain_mean"]
    low, high = axis_range([host, host * gpu, study - ci, ceiling], [study + ci, host, host * gpu, ceiling])
    cut = study - ci <= low  # a CI that reaches below the axis (at or below 0, which a log axis cannot show) ends there
    fig = go.Figure()
    fig.add_trace(go.Bar(y=cells["cell"], x=host - 1, base=[1.0] * len(cells), orientation="h", name="host's part",
                         marker_color=HOST, customdata=host, hovertemplate="host's part x%{customdata:.2f}"))
    fig.add_trace(go.Bar(y=cells["cell"], x=host * gpu - host, base=host, orientation="h", name="GPU's part",
                         marker_color=GPU, customdata=gpu, hovertemplate="GPU's part x%{customdata:.2f}"))
    fig.add_trace(go.Scatter(y=cells["cell"], x=study, mode="markers", name="study's gain (95 % CI)",
                             marker={"color": MARK, "symbol": "line-ns-open", "size": 16},
                             error_x={"type": "data", "array": ci, "arrayminus": ci.where(~cut, study - low)},
                             customdata=[[c, " (its CI reaches below the axis: cut there)" if low_cut else ""]
                                         for c, low_cut in zip(ci, cut)],
                             hovertemplate="study's gain %{x:.2f} ± %{customdata[0]:.2f}%{customdata[1]}"))
    fig.add_trace(go.Scatter(y=cells["cell"], x=ceiling, mode="markers",
                             name="GPU-only gain (no input pipeline)", customdata=cells["gpu_only_gain_mean"],
                             marker={"color": MARK, "symbol": "diamond-open", "size": 12},
                             hovertemplate="GPU-only gain x%{customdata:.2f}"))
    fig.add_vline(x=1.0, line_dash="dot", line_color="grey")
    fig.update_layout(title=title, barmode="overlay", height=160 + 60 * len(cells),
                      xaxis={"type": "log", "title": "gain (x one job alone, log axis: the parts multiply)",
                             "range": [math.log10(low), math.log10(high)]})
    return fig


def axis_range(lows: list[pd.Series], highs: list[pd.Series]) -> tuple[float, float]:
    """A log axis' range (in data units) that holds 1 and every value and CI end above 0 given, with some room; the
    ends at or below 0 (a CI of a noisy gain) are left to be cut at its lower end.

    >>> axis_range([pd.Series([1.2, -0.5])], [pd.Series([3.0])])
    (0.8, 3.75)
    """
    positive = [v for s in lows for v in s.dropna() if v > 0]
    top = max([1.0, *(v for s in highs for v in s.dropna())])
    return min([1.0, *positive]) / 1.25, top * 1.25


def split_reading(summary: pd.DataFrame, only: Sequence[str] = ()) -> str:
    """The figure in words, computed from the numbers: per cell (or those named in `only`) its gain as host's part x
    GPU's part and the host's share of it."""
    cells = split_cells(summary, only)
    if cells.empty:
        return "no cell with a host-matched baseline"
    parts = [f"{r.cell}: study's gain {r.study_gain_mean:.2f} = host's part {r.host_part_mean:.2f} x GPU's part "
             f"{r.gpu_part_mean:.2f}{_share_words(r.host_share)}" for r in cells.itertuples()]
    return "; ".join(parts)


def _share_words(host_share: float) -> str:
    """The host's share of a gain in words: a percentage where both parts gain, else which part is all of it and
    more (the other below 1 took some back); nothing where the gain is not above 1 (NaN).

    >>> for share in (0.62, 1.24, -0.1, float("nan")):
    ...     print(repr(_share_words(share)))
    ' (the host: 62 % of it, in log terms)'
    " (the host: all of it and more; the GPU's part, below 1, took some back)"
    " (the GPU: all of it and more; the host's part, below 1, took some back)"
    ''
    """
    if host_share != host_share:
        return ""
    if host_share > 1:
        return " (the host: all of it and more; the GPU's part, below 1, took some back)"
    if host_share < 0:
        return " (the GPU: all of it and more; the host's part, below 1, took some back)"
    return f" (the host: {100 * host_share:.0f} % of it, in log terms)"
