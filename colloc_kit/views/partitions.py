"""The partitions of one GPU drawn: MIG layouts (a row per layout, its instances on the memory slices, coloured by the
job each serves) and MPS partitions (each one's share of SMs). `colloc_kit.plots` offers both.

    >>> from colloc_kit.gpu import mig_planner
    >>> mig_layouts({"4g+2g+1g": mig_planner.plan("4g,2g,1g", "A100-40GB")}).layout.title.text
    'MIG layouts on A100-40GB'
"""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go

from colloc_kit.views.style import PALETTE, TEMPLATE, colours, empty

__all__ = ["mig_layouts", "partition_shares"]


MIG_ROW_PX, MIG_MIN_HEIGHT_PX = 80, 280  # one layout row stays readable (a single row used to collapse to a line)


def mig_layouts(plans: dict, title: str = "MIG layouts", job_labels: list[str] | None = None) -> go.Figure:
    """One row per layout: the GPU's memory slices and the instances placed on them (name, compute slices, start).

    `plans`: {label: colloc_kit.gpu.mig_planner.Plan}; placements count in memory slices, as NVML's do. `job_labels`:
    the job each instance serves (instance i serves job i), drawn on it and coloured by its model (the label before
    ':' or '#': 'R26 #2' is R26), with a legend, so that layouts that differ only in which job gets which instance
    look different.

    >>> from colloc_kit.gpu import mig_planner as planner
    >>> fig = mig_layouts({"3g+3g": planner.plan(["3g", "3g"], "H100-80GB")}, job_labels=["job 0", "job 1"])
    >>> fig.layout.height, [a.text.split("<br>")[0] for a in fig.layout.annotations][:2]
    (280, ['job 0', 'job 1'])
    """
    if not plans:
        return empty(title, "no layout to draw")
    gpu = next(iter(plans.values())).gpu
    labels = list(plans)
    fig = go.Figure(layout={"title": f"{title} on {gpu.name}", "template": TEMPLATE, "showlegend": True,
                            "height": max(MIG_MIN_HEIGHT_PX, 160 + MIG_ROW_PX * len(labels)),
                            "margin": {"l": 140, "r": 150},
                            "xaxis": {"range": [0, gpu.memory_slices], "dtick": 1, "title": "memory slice",
                                      "showgrid": True},
                            "yaxis": {"range": [len(labels) - 0.5, -0.5], "tickvals": list(range(len(labels))),
                                      "ticktext": labels}})
    models = {label: [re.split(r"\s*[:#]", job)[0] for job in _row_jobs(label, job_labels)] for label in labels}
    palette = colours(sorted({model for jobs in models.values() for model in jobs}))
    for model in palette:  # the legend: a square per model
        fig.add_scatter(x=[None], y=[None], mode="markers", name=model, marker={"symbol": "square", "size": 14,
                                                                                "color": palette[model]})
    for row, (label, plan) in enumerate(plans.items()):
        for i, inst in enumerate(plan.instances):
            fill = palette[models[label][i]] if i < len(models[label]) else _color(i)
            fig.add_shape(type="rect", x0=inst.start + 0.05, x1=inst.start + inst.size - 0.05, y0=row - 0.35,
                          y1=row + 0.35, fillcolor=fill, opacity=0.85, line={"width": 1})
            job = f"{job_labels[i]}<br>" if job_labels and i < len(job_labels) else ""
            fig.add_annotation(x=inst.start + inst.size / 2, y=row, showarrow=False, font={"color": "white"},
                               text=f"{job}{inst.profile.name}<br>{inst.profile.sm_count} SMs")
        idle = gpu.compute_slices - plan.compute_slices
        fig.add_annotation(x=gpu.memory_slices, y=row, xanchor="left", showarrow=False, xshift=6,
                           text=f"{idle} compute slice{'s' if idle != 1 else ''} idle" if idle else "")
    return fig


def _row_jobs(label: str, job_labels: list[str] | None) -> list[str]:
    """The job each instance of a layout serves: `job_labels`, else a mix's ('R152 + R50 as 1+2': R152, R50, R50)."""
    mix = re.fullmatch(r"(.+) as ([\d+]+)", label)
    return job_labels or ([name for name, n in zip(mix[1].split(" + "), mix[2].split("+")) for _ in range(int(n))]
                          if mix else [])


def partition_shares(table: pd.DataFrame, title: str = "What each MPS partition grants") -> go.Figure:
    """Stacked bars per layout: each partition's share of SMs (thread percentage); memory limits in the hover.

    `table`: one row per partition with `layout`, `partition`, `thread_percentage`, `memory_limit_mb`.
    """
    if table.empty:
        return empty(title, "no partition layout given")
    fig = go.Figure(layout={"title": title, "template": TEMPLATE, "barmode": "stack", "showlegend": False,
                            "yaxis": {"title": "active thread percentage (share of SMs)", "range": [0, 105]}})
    for i, row in enumerate(table.itertuples()):
        fig.add_bar(x=[row.layout], y=[row.thread_percentage], text=f"{row.partition}: {row.thread_percentage}%",
                    marker_color=_color(i), hovertext=f"memory limit {row.memory_limit_mb:,.0f} MB",
                    textposition="inside")
    fig.add_hline(y=100, line_dash="dot", line_color="grey")
    return fig



def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]
