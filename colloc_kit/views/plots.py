"""Plotly figures from the tidy frames of `colloc_kit.analysis` (one function per picture, each returns a Figure).

    >>> summary = analysis.summarize(colloc_kit.load("runs"))                                 # doctest: +SKIP
    >>> throughput_vs_copies(summary).show()                                                 # doctest: +SKIP

`use_renderer("plotly_mimetype")` is what batch runs set: JupyterLab draws the mimetype, and the batch's HTML
reports draw the same JSON with the one plotly.js of their folder, offline.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from colloc_kit.analysis.summaries import workload_label
from colloc_kit.statuses import COMPLETE
from colloc_kit.views import deferred_iri
from colloc_kit.views.frontier import safe_share  # the safe-share frontier (an inference job beside training)
from colloc_kit.views.partitions import mig_layouts, partition_shares  # MIG layouts and MPS partitions drawn
from colloc_kit.views.split import gain_split, split_cells, split_reading  # each gain: the host's and the GPU's part
from colloc_kit.views.style import (
    MIXES,
    PALETTE,
    TEMPLATE,
    category,
    colours,
    empty,
    error_bars,
    facets,
    grid,
    in_order,
    noisy,
    say_clipped,
    series,
    short_label,
    where,
)

__all__ = ["TEMPLATE", "use_renderer", "empty", "noisy", "series", "by_mode", "throughput_vs_copies",
           "epoch_time_vs_copies", "gain_vs_growth", "metric_bars", "jobs_by_mode", "batch_size_curves",
           "memory_fit_figure", "mig_layouts", "partition_shares", "job_metrics", "who_lost", "safe_share",
           "gain_split", "split_cells", "split_reading"]


def use_renderer(name: str) -> None:
    """Set plotly's default renderer for this kernel ("" leaves plotly's own choice, right for JupyterLab), and the
    kit's figure style as the default template, so that a notebook's own figures look like the kit's. The renderers
    import jsonschema, whose `iri` grammar costs a kernel 1.4 s: `deferred_iri` builds it on first use instead."""
    deferred_iri.defer()
    pio.templates.default = TEMPLATE
    if name:
        pio.renderers.default = name


def by_mode(summary: pd.DataFrame, metric: str, title: str, y_title: str, x: str = "copies",
            reference: float | None = None) -> go.Figure:
    """One line per mode of `<metric>_mean` against copies, one plot per workload (and one for mixes of workloads,
    against their number of jobs); error bars are its 95 % CI where the figure has one (`<metric>_ci`), else the
    spread over repeats. Flagged configurations (`flags`) get open markers, and the hover says why, with
    `bound_by`. Each mode has one colour and one legend entry in every plot."""
    mean, spread = f"{metric}_mean", _error_column(summary, metric)
    data = summary.dropna(subset=[mean]) if mean in summary else summary.iloc[0:0]
    if data.empty:
        return empty(title, f"not drawn: no run here measured {_what(metric)}")
    data = data.assign(series=series(data))
    parts = facets(data)
    palette = colours(sorted(data["series"].unique()))
    fig = grid([t for t, _ in parts], title)
    for i, (facet, rows) in enumerate(parts):
        if facet == MIXES:
            _mix_points(fig, rows, i, mean, spread, palette)
            continue
        for label, points in rows.groupby("series", sort=True):
            points = points.sort_values(x)
            notes = points.reindex(columns=["jobs_label", "repeats", "bound_by", "flags"]).astype(object).fillna("")
            fig.add_scatter(x=points[x], y=points[mean], name=label, legendgroup=label,
                            showlegend=label not in {t.name for t in fig.data}, mode="lines+markers",
                            line={"color": palette[label]},
                            error_y=error_bars(points, mean, spread),
                            marker={"symbol": ["circle-open" if f else "circle" for f in notes["flags"]], "size": 9,
                                    "color": palette[label]},
                            customdata=notes, hovertemplate=HOVER + label + "</extra>", **where(i))
        fig.update_xaxes(tickmode="array", tickvals=sorted(rows[x].dropna().unique()),
                         title_text=X_TITLES.get(x, x.replace("_", " ")), **where(i))
    for i in range(len(parts)):
        if reference is not None:
            fig.add_hline(y=reference, line_dash="dot", line_color="grey", **where(i))
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=y_title, col=1)
    return say_clipped(fig, data, mean, spread)


HOVER = ("%{customdata[0]}<br>%{y:.3g} +- %{error_y.array:.2g} (repeats: %{customdata[1]}; bound by "
         "%{customdata[2]})<br>%{customdata[3]}<extra>")
X_TITLES = {"copies": "copies (identical jobs)", "n_jobs": "jobs in the mix"}


def _mix_points(fig: go.Figure, rows: pd.DataFrame, i: int, mean: str, spread: str, palette: dict) -> None:
    """The mixes' plot: a point per mix and mode against the mix's number of jobs, the modes side by side."""
    axis = "n_jobs" if "n_jobs" in rows else "copies"
    modes = sorted(rows["series"].unique())
    for label, points in rows.groupby("series", sort=True):
        notes = points.reindex(columns=["jobs_label", "repeats", "bound_by", "flags"]).fillna("")
        shift = (modes.index(label) - (len(modes) - 1) / 2) * 0.12
        fig.add_scatter(x=points[axis] + shift, y=points[mean], name=label, legendgroup=label, mode="markers",
                        showlegend=label not in {t.name for t in fig.data},
                        error_y=error_bars(points, mean, spread),
                        marker={"symbol": ["circle-open" if f else "circle" for f in notes["flags"]], "size": 8,
                                "color": palette[label]},
                        customdata=notes, hovertemplate=HOVER + label + "</extra>", **where(i))
    ticks = sorted(rows[axis].dropna().unique())  # the range holds every point, shifted or not, with room around
    fig.update_xaxes(tickmode="array", tickvals=ticks, title_text=X_TITLES[axis], range=[ticks[0] - 0.5,
                                                                                          ticks[-1] + 0.5], **where(i))


def throughput_vs_copies(summary: pd.DataFrame) -> go.Figure:
    """Normalized throughput (1 = one job alone) against the number of copies, per mode."""
    return by_mode(summary, "normalized_throughput", "Throughput gain from collocation",
                   "gain (x one job alone)", reference=1.0)


def epoch_time_vs_copies(summary: pd.DataFrame) -> go.Figure:
    """How much longer each job's epoch takes when it shares the device (1 = alone)."""
    return by_mode(summary, "epoch_time_growth", "Epoch time of each job", "epoch time (x alone)", reference=1.0)


def gain_vs_growth(summary: pd.DataFrame) -> go.Figure:
    """The trade-off in one picture: throughput gain (up) against per-job slowdown (right), per mode and copies,
    one plot per workload (and one for mixes)."""
    title = "Throughput gain against per-job slowdown"
    data = summary.dropna(subset=["normalized_throughput_mean", "epoch_time_growth_mean"])
    if data.empty:
        return empty(title, "needs runs with baselines (a job of the same workload run alone)")
    data = data.assign(series=series(data))
    parts, palette = facets(data), colours(sorted(data["series"].unique()))
    fig = grid([t for t, _ in parts], title, shared_y=False)
    top = max(data["epoch_time_growth_mean"].max(), data["normalized_throughput_mean"].max(), 1.0) * 1.05
    for i, (facet, rows) in enumerate(parts):
        jobs = rows["n_jobs"] if facet == MIXES and "n_jobs" in rows else rows["copies"]
        rows = rows.assign(point=[f"{int(n)} jobs" if facet == MIXES else f"x{int(n)}" for n in jobs])
        for label, points in rows.groupby("series", sort=True):
            fig.add_scatter(x=points["epoch_time_growth_mean"], y=points["normalized_throughput_mean"], name=label,
                            legendgroup=label, showlegend=label not in {t.name for t in fig.data},
                            mode="markers" if facet == MIXES else "markers+text", text=points["point"],
                            textposition="top center",
                            marker={"size": 10, "color": palette[label]}, **where(i))
        fig.add_scatter(x=[1, top], y=[1, top], mode="lines", line={"dash": "dot", "color": "grey"},
                        name="gain = slowdown", legendgroup="diagonal", showlegend=i == 0, hoverinfo="skip",
                        **where(i))
    fig.update_xaxes(title_text="epoch time (x alone)", range=[0, top])
    fig.update_yaxes(range=[0, top])
    fig.update_yaxes(title_text="gain (x one job alone)", col=1)
    return fig


def metric_bars(summary: pd.DataFrame, metric: str, title: str, y_title: str, x: str = "copies") -> go.Figure:
    """Grouped bars of `<metric>_mean` per mode (colour) and copies (x, in numeric order; or another column, e.g. a
    mix), one plot per workload (and one for mixes, by their jobs), e.g. SM activity or energy per image; error
    bars as in `by_mode`."""
    mean, spread = f"{metric}_mean", _error_column(summary, metric)
    data = summary.dropna(subset=[mean]) if mean in summary else summary.iloc[0:0]
    if data.empty:
        return empty(title, f"not drawn: no run here measured {_what(metric)} (it needs a monitored GPU)")
    data = data.assign(series=series(data))
    parts, palette = facets(data), colours(sorted(data["series"].unique()))
    fig = grid([t for t, _ in parts], title)
    fig.update_layout(barmode="group")
    for i, (facet, rows) in enumerate(parts):
        if facet == MIXES:
            _mix_points(fig, rows, i, mean, spread, palette)
            continue
        order = in_order(rows[x])
        for label, bars in rows.groupby("series", sort=True):
            fig.add_bar(x=bars[x].map(category), y=bars[mean], name=label, legendgroup=label,
                        showlegend=label not in {t.name for t in fig.data}, marker_color=palette[label],
                        error_y=error_bars(bars, mean, spread),
                        customdata=bars.reindex(columns=["jobs_label"]).fillna(""),
                        hovertemplate="%{customdata[0]}<br>%{y:.3g}<extra>" + label + "</extra>", **where(i))
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order,
                         title_text=X_TITLES.get(x, x.replace("_", " ")), **where(i))
    fig.update_yaxes(title_text=y_title, col=1)
    return say_clipped(fig, data, mean, spread)


def _what(metric: str) -> str:
    """A figure's name as a sentence says it: 'sm_util_pct' -> 'SM active', 'normalized_throughput' -> 'gain'."""
    from colloc_kit.views.tables import readable  # noqa: PLC0415 - the one table formatter names the metrics too

    return readable(metric).split(" (")[0]


def _error_column(summary: pd.DataFrame, metric: str) -> str:
    """The column drawn as error bars: the 95 % CI where the figure has one, else the spread over repeats."""
    return f"{metric}_ci" if f"{metric}_ci" in summary else f"{metric}_std"


def jobs_by_mode(jobs: pd.DataFrame, metric: str = "relative_throughput",
                 title: str = "Each job's throughput relative to running alone") -> go.Figure:
    """Stacked bars per run configuration: one segment per job, e.g. the relative throughput of a mixed workload."""
    data = jobs.dropna(subset=[metric]) if metric in jobs else jobs.iloc[0:0]
    if data.empty:
        return empty(title, f"no complete job has {metric.replace('_', ' ')}")
    data = data.assign(workload=data.apply(workload_label, axis=1),
                       config=data["mode_label"].astype(str).map(short_label) + " x" + data["copies"].astype(str))
    mean = data.groupby(["config", "workload", "slot_label"], dropna=False)[metric].mean().reset_index()
    fig = go.Figure(layout={"title": title, "template": TEMPLATE, "barmode": "stack",
                            "xaxis": {"title": "mode x copies", "type": "category"},
                            "yaxis_title": "share of its speed alone (1 = alone)"})
    palette = colours(sorted(mean["workload"].unique()))
    for workload, rows in mean.groupby("workload", sort=True):
        fig.add_bar(x=rows["config"], y=rows[metric], name=workload, text=rows["slot_label"], textposition="inside",
                    marker_color=palette[workload])
    return fig


def who_lost(jobs: pd.DataFrame, cell: str = "jobs_label",
             title: str = "Who lost when jobs shared the device") -> go.Figure:
    """Each job's images/s relative to running alone (1 = as fast as alone; its slowdown is the inverse) in each run
    configuration, one series per way of sharing side by side (e.g. naive against MPS): the lowest marker of a
    configuration is the job that lost most. Markers of mixed configurations name their model (its `name` where the
    frame has one, e.g. the study's 'R26'); the hover gives the job, its slowdown, its share asked and had, and the
    configuration's Jain index.

    `jobs`: `analysis.job_summary` (filter its `mode_label` to the ways to compare); `cell`: the column that labels
    the x axis (e.g. the study's mixes, `findings`' `mix`).

    >>> who_lost(analysis.job_summary(results)).show()                        # doctest: +SKIP
    """
    data = jobs.dropna(subset=["relative_throughput_mean"]) if "relative_throughput_mean" in jobs else jobs.iloc[0:0]
    if data.empty:
        return empty(title, "needs jobs that shared the device and a lone run of each of their workloads")
    fig = go.Figure(layout={"title": title, "template": TEMPLATE, "scattermode": "group", "height": 560,
                            "xaxis": {"title": "run configuration", "type": "category", "tickangle": -30},
                            "yaxis_title": "images/s relative to alone (x its lone images/s)"})
    mixed = data.groupby(cell)["workload"].transform("nunique") > 1
    models = data["name"] if "name" in data else data["workload"].str.split().str[0].str.removeprefix("timm.")
    labels = data["mode_label"].astype(str).map(short_label)
    palette = colours(sorted(labels.unique()))
    for i, (label, rows) in enumerate(data.groupby(labels, sort=True)):  # names left of one series, right of the next
        fig.add_scatter(x=rows[cell], y=rows["relative_throughput_mean"], name=label, mode="markers+text",
                        text=models[rows.index].where(mixed[rows.index], ""), cliponaxis=False, textfont_size=10,
                        textposition="middle left" if i % 2 == 0 else "middle right",
                        marker={"size": 10, "color": palette[label]},
                        hovertext=[_job_hover(r) for r in rows.itertuples()], hoverinfo="text")
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    cells = data[cell].nunique()  # room beside the first and last: names left of a marker never reach the y ticks
    fig.update_xaxes(range=[-0.9, cells - 0.1])
    fig.update_yaxes(rangemode="tozero")
    return fig


def _job_hover(row: Any) -> str:  # Any: a row of `itertuples()`, a namedtuple whose fields are the frame's columns
    """One job's hover text: who it is, its slowdown, its shares, its configuration's fairness."""
    def known(value: object) -> bool:
        return value == value and value is not None  # not NaN

    lines = [f"{row.job} ({row.workload})", f"slowdown {row.epoch_time_growth_mean:.2f}x"]
    if known(row.share_asked_pct):
        lines.append(f"share asked {row.share_asked_pct:.0f} %, had {row.share_had_pct_mean:.0f} %")
    if known(row.fairness_index_mean):
        lines.append(f"Jain index of its configuration {row.fairness_index_mean:.3f}")
    return "<br>".join(lines + [f"{row.repeats} repeat(s)"])


def batch_size_curves(jobs: pd.DataFrame) -> go.Figure:
    """One job alone: images/s (left) and peak memory (right) against batch size (log axis, a tick at each batch size
    measured), one line per model."""
    data = jobs[jobs["status"] == COMPLETE].sort_values("batch_size") if not jobs.empty else jobs
    if data.empty:
        return empty("One job alone", "no complete job to draw")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("throughput", "peak memory"), horizontal_spacing=0.1)
    palette = colours(sorted(data["model"].unique()))
    for model, rows in data.groupby("model", sort=True):
        agg = rows.groupby("batch_size").agg(images_per_s=("images_per_s", "median"),
                                             peak_memory_mb=("peak_memory_mb", "median")).reset_index()
        line = {"color": palette[model]}
        fig.add_scatter(x=agg["batch_size"], y=agg["images_per_s"], name=model, mode="lines+markers", line=line,
                        legendgroup=model, row=1, col=1)
        fig.add_scatter(x=agg["batch_size"], y=agg["peak_memory_mb"], name=model, mode="lines+markers", line=line,
                        legendgroup=model, showlegend=False, row=1, col=2)
    sizes = sorted(data["batch_size"].unique())
    fig.update_xaxes(type="log", tickmode="array", tickvals=sizes, ticktext=[str(int(b)) for b in sizes],
                     title_text="batch size (images per step)")
    fig.update_yaxes(title_text="images/s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="peak memory (MB)", rangemode="tozero", row=1, col=2)
    fig.update_layout(title="One job alone: throughput and memory against batch size", template=TEMPLATE)
    return fig


def memory_fit_figure(fit: pd.DataFrame) -> go.Figure:
    """Copies of each workload that fit in each capacity (card, MIG instance), from its steady footprint."""
    title = "How many copies fit in memory"
    if fit.empty or fit["copies_fit"].isna().all():
        return empty(title, "no steady GPU memory measured yet (it needs a monitored GPU)")
    fig = go.Figure(layout={"title": title, "template": TEMPLATE, "barmode": "group",
                            "xaxis": {"title": "memory capacity (card or MIG instance)", "type": "category"},
                            "yaxis_title": "copies that fit (count)"})
    palette = colours(sorted(fit["workload"].unique()))
    for workload, rows in fit.groupby("workload", sort=True):
        fig.add_bar(x=rows["capacity"], y=rows["copies_fit"], name=workload, marker_color=palette[workload],
                    customdata=rows[["steady_gpu_memory_mb", "peak_memory_mb"]],
                    hovertemplate="%{y} copies of %{customdata[0]:.0f} MB steady (torch peak %{customdata[1]:.0f} MB)"
                                  "<extra>" + workload + "</extra>")
    return fig



def job_metrics(jobs: pd.DataFrame, columns: list[str], title: str, y_title: str) -> go.Figure:
    """Grouped bars per workload (model and batch size) of per-job monitor metrics, e.g. SM utilization."""
    from colloc_kit.views.tables import readable  # noqa: PLC0415 - the one table formatter names the metrics too

    present = [c for c in columns if c in jobs and jobs[c].notna().any()]
    if jobs.empty or not present:
        return empty(title, "no job has these metrics (they need a monitored GPU)")
    data = jobs.assign(workload=jobs.apply(workload_label, axis=1))
    mean = data.groupby("workload", sort=False)[present].mean().dropna(how="all").reset_index()
    fig = go.Figure(layout={"title": title, "template": TEMPLATE, "barmode": "group", "yaxis_title": y_title,
                            "xaxis": {"title": "workload", "type": "category"}})
    for column, colour in zip(present, PALETTE):
        fig.add_bar(x=mean["workload"], y=mean[column], name=readable(column), marker_color=colour)
    return fig
