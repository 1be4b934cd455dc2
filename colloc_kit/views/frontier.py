"""The safe-share frontier: per served model, the training images/s beside an inference job against its p99, a point
per setting (`serve_advise.frontier`: its launches pooled), a colour per setting, a marker shape per training mix
(where there are several), the SLO as a line; filled points met it, open ones did not; error bars the p99's 95 % CI
(over the setting's launches, or its one window's), a side left out where the requests give no bound.

    >>> table = serve_advise.frontier(colloc_kit.load("runs/serving"))     # doctest: +SKIP
    >>> safe_share(table, slo_ms=25).show()                                 # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from colloc_kit.predict.serve_advise import p99_words
from colloc_kit.views.style import colours, empty, grid, setting_words, where

__all__ = ["safe_share"]

SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "star"]  # one per training mix, in order


def safe_share(table: pd.DataFrame, slo_ms: float | None = None, title: str = "Training beside an inference job"
               ) -> go.Figure:
    """The frontier figure of `predict.serve_advise.frontier`'s table: x the inference p99 (ms, its 95 % CI as error
    bars), y the training images/s beside it, one plot per served model; `slo_ms` replaces the runs' own SLO."""
    shared = table[table["shared"].astype(bool)] if len(table) else table
    if shared.empty:
        return empty(title, "no run with an inference job beside training (run a spec with role: serve)")
    shared = shared.assign(setting=shared["mode_label"].map(setting_words))
    served = sorted(shared["served"].unique())
    slos = {name: slo_ms if slo_ms is not None else shared.loc[shared["served"] == name, "slo_ms"].dropna().max()
            for name in served}
    fig = grid([f"{s} served" + (f" (SLO {slos[s]:g} ms: dashed)" if pd.notna(slos[s]) else "") for s in served], title,
               shared_y=False)
    palette = colours(sorted(shared["setting"].unique()))
    mixes = sorted(shared["mix"].astype(str).unique())
    shape = {mix: SYMBOLS[i % len(SYMBOLS)] for i, mix in enumerate(mixes)}
    for i, name in enumerate(served):
        rows, slo = shared[shared["served"] == name], slos[name]
        for label, points in rows.groupby("setting", sort=True):
            met = points["latency_p99_ms"] <= slo if pd.notna(slo) else points["within_slo"]
            symbols = [shape[str(mix)] + ("" if m else "-open") for mix, m in zip(points["mix"], met)]
            ci = [p99_words(row) for _, row in points.iterrows()]
            fig.add_trace(go.Scatter(
                x=points["latency_p99_ms"], y=points["train_images_per_s"], mode="markers", name=label,
                legendgroup=label, showlegend=False,
                marker={"color": palette[label], "size": 11, "symbol": symbols},
                error_x={"type": "data", "symmetric": False,
                         "array": (points["latency_p99_ms_hi"] - points["latency_p99_ms"]).fillna(0),
                         "arrayminus": (points["latency_p99_ms"] - points["latency_p99_ms_lo"]).fillna(0)},
                customdata=list(zip(points["mix"], ci)),
                hovertemplate=f"{label}, beside %{{customdata[0]}}<br>p99 %{{x:.1f}} ms (%{{customdata[1]}})"
                              "<br>training %{y:,.0f} images/s<extra></extra>"),
                **where(i))
        if i == 0:  # the legend: a key per setting (a filled point: its colour) and per mix (its shape), no hover
            for label in palette:
                fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=label, legendgroup=label,
                                         hoverinfo="skip", marker={"color": palette[label], "size": 11}), **where(i))
            for mix in mixes if len(mixes) > 1 else []:
                fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"beside {mix}",
                                         legendgroup=f"mix {mix}", hoverinfo="skip",
                                         marker={"color": "#7f7f7f", "size": 11, "symbol": shape[mix]}), **where(i))
        if pd.notna(slo):  # no annotation on it: on a log axis plotly places one at 10**x (an axis up to 1e28 ms)
            fig.add_vline(x=slo, line_dash="dash", **where(i))
        fig.update_xaxes(title_text="inference p99 (ms)", type="log", **where(i))
        fig.update_yaxes(title_text="training images/s beside it", **where(i))
    return fig
