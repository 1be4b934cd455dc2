"""The kit's figure style, one for every figure: a plotly template of its own (plotly_white, a palette of twelve
colours a reader tells apart, legends below the plot), a fixed colour per sharing mode, short legend labels, plots
split into facets (one per workload, one for mixes of workloads) instead of twenty series in one, and the mark of a
figure that is no result (a noisy machine).

    >>> fig = go.Figure(layout={"template": TEMPLATE})
    >>> fig.layout.template.layout.legend.orientation
    'h'
"""

from __future__ import annotations

import math
import re
import textwrap

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

__all__ = ["PALETTE", "MODE_COLOURS", "MAX_SERIES", "MIXES", "TOP_MARGIN_PX", "TEMPLATE", "EMPTY_HEIGHT_PX", "empty",
           "noisy",
           "error_bars", "say_clipped",
           "short_label", "setting_words", "counted", "colours",
           "series", "facets", "grid", "where", "category", "in_order"]

# Twelve colours a reader tells apart (Tableau 10 and two more); each sharing mode keeps its own in every figure
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
           "#bab0ac", "#17becf", "#8c564b")
MODE_COLOURS = (("exclusive", "#7f7f7f"), ("naive", "#f28e2b"), ("mps partition", "#59a14f"),
                ("mps(partitions", "#59a14f"), ("mps(thread", "#76b7b2"), ("mps", "#4e79a7"), ("mig", "#b07aa1"))
MAX_SERIES = 8  # traces in one plot (one facet) at most; more go into facets
FACET_COLUMNS, FACET_HEIGHT_PX = 3, 300
MIXES = "mixes of workloads"  # the facet of runs whose jobs are not copies of one workload
TOP_MARGIN_PX = 80  # room for the title; a noisy figure's box adds to it
pio.templates["colloc_kit"] = go.layout.Template(layout={
    "colorway": PALETTE, "font": {"size": 13},
    "title": {"x": 0, "xref": "paper", "xanchor": "left", "font": {"size": 17}},
    "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yref": "container", "yanchor": "bottom",
               "title": {"text": ""}, "font": {"size": 12}},
    "margin": {"l": 70, "r": 30, "t": TOP_MARGIN_PX, "b": 110}, "hoverlabel": {"namelength": -1},
    "xaxis": {"automargin": True, "title": {"font": {"size": 12}}},
    "yaxis": {"automargin": True, "title": {"font": {"size": 12}}}})
TEMPLATE = "plotly_white+colloc_kit"  # the kit's figure style: plotly_white, its palette, legends below


EMPTY_HEIGHT_PX = 70  # a figure with nothing to draw is one line of words, not an empty 300-px plot


def empty(title: str, note: str) -> go.Figure:
    """A figure that says in one line why there is nothing to draw (instead of an error or an empty plot).

    >>> empty("SM activity", "not measured here (it needs a monitored GPU)").layout.height
    70
    """
    fig = go.Figure(layout={"template": TEMPLATE, "xaxis": {"visible": False}, "yaxis": {"visible": False},
                            "height": EMPTY_HEIGHT_PX, "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
                            "showlegend": False})
    fig.add_annotation(text=f"<b>{title}</b>: {note}", showarrow=False, x=0, xanchor="left", y=0.5, xref="paper",
                       yref="paper", font={"size": 13, "color": "#555"})
    return fig


def noisy(fig: go.Figure, warning: str | None) -> go.Figure:
    """The figure marked as no result where `warning` (the page's noise check) is given: every trace greyed, the
    warning in a box above the plot (the figure taller by as much: the box covers no point or label), the title
    saying so. Without a warning the figure is returned as it is.

    >>> noisy(go.Figure(layout={"title": "Gain"}), "identical jobs differ 2.1x").layout.title.text
    'Gain (not a result: too noisy)'
    """
    if not warning:
        return fig
    fig.update_traces(marker_color="#c8c8c8", opacity=0.5, selector=lambda t: hasattr(t, "marker"))
    fig.update_traces(line_color="#c8c8c8", selector=lambda t: hasattr(t, "line"))
    lines = textwrap.wrap(f"Not a result: {warning}", 110)
    above = sum(1 for a in fig.layout.annotations if a.yref == "paper" and a.y == 1 and a.yanchor == "bottom")
    shift = 6 + 22 * above  # above the plot, over the notes already there (say_clipped's): never over a point
    fig.add_annotation(text="<br>".join(lines), showarrow=False, x=0.5, y=1, yanchor="bottom", yshift=shift,
                       xref="paper", yref="paper", font={"size": 12}, bgcolor="rgba(255,255,255,0.85)",
                       bordercolor="#d62728", borderwidth=1)
    top = (fig.layout.margin.t if fig.layout.margin.t is not None else TOP_MARGIN_PX) + shift + 17 * len(lines) + 12
    fig.update_layout(title_text=f"{fig.layout.title.text or ''} (not a result: too noisy)".strip(),
                      margin={"t": top}, height=(fig.layout.height or 450) + 17 * len(lines) + shift + 12)
    return fig


def error_bars(points: pd.DataFrame, mean: str, spread: str) -> dict:
    """Error bars of `spread`, the lower arm cut at 0: a gain, a rate or a share is never below 0."""
    upper = points[spread].fillna(0) if spread in points else pd.Series(0.0, index=points.index)
    return {"type": "data", "array": upper, "arrayminus": upper.clip(upper=points[mean].clip(lower=0)),
            "visible": True}


def say_clipped(fig: go.Figure, data: pd.DataFrame, mean: str, spread: str) -> go.Figure:
    """The figure with a note under it where an error bar was cut at 0."""
    if spread in data and (data[spread].fillna(0) > data[mean]).any():
        fig.add_annotation(text="error bars cut at 0 (the CI reaches below 0: too few repeats to know the value)",
                           showarrow=False, x=1, xanchor="right", y=1, yref="paper", yanchor="bottom", yshift=28,
                           xref="paper", font={"size": 11, "color": "#8a4b00"})
    return fig


def short_label(label: str) -> str:
    """A mode's label as a legend says it: 'mps(partitions=1g+1g+1g+1g+1g+1g+1g)' -> 'MPS partitions 7 x 1g'.

    >>> short_label("mps(partitions=1g+1g+1g+1g+1g+1g+1g)"), short_label("mps(thread_percentage=60+30+10)")
    ('MPS partitions 7 x 1g', 'MPS threads 60+30+10 %')
    >>> short_label("mig(layout=3g.40gb+2g.20gb)"), short_label("naive")
    ('MIG 3g.40gb+2g.20gb', 'naive')
    >>> short_label("mps")
    'MPS'
    """
    match = re.fullmatch(r"(\w+)\((\w+)=(.*)\)", label)
    if not match:
        return label.upper() if label in ("mps", "mig") else label
    name, option, value = match.groups()
    value = counted(value)
    words = {"partitions": f"partitions {value}", "thread_percentage": f"threads {value} %", "layout": value}
    return f"{name.upper() if name in ('mps', 'mig') else name} {words.get(option, f'{option} {value}')}"


def setting_words(label: str) -> str:
    """A serving setting as a reader says it: the training jobs' equal MPS share or lower priority in words (the
    served job, listed first, keeps the whole GPU or normal priority), other labels as `short_label` writes them.

    >>> setting_words("mps(thread_percentage=100+50+50+50+50+50+50+50+50)")
    'MPS, training at 50 %'
    >>> setting_words("mps(thread_percentage=100+25)")
    'MPS, training at 25 %'
    >>> setting_words("mps(client_priority=0+1+1+1+1+1+1+1+1)"), setting_words("mps(partitions=3g+4g)")
    ('MPS, training at low priority', 'MPS partitions 3g+4g')
    >>> setting_words("mps(thread_percentage=60+30+10)"), setting_words("naive")
    ('MPS threads 60+30+10 %', 'naive')
    """
    match = re.fullmatch(r"mps\((thread_percentage|client_priority)=(\d+)((?:\+\d+)+)\)", label)
    rest = set(match[3].strip("+").split("+")) if match else set()
    if match and len(rest) == 1:
        share = rest.pop()
        if match[1] == "thread_percentage" and match[2] == "100":
            return f"MPS, training at {share} %"
        if match[1] == "client_priority" and match[2] == "0" and share == "1":
            return "MPS, training at low priority"
    return short_label(label)


def counted(layout: str) -> str:
    """A layout with its repeated parts counted: '1g+1g+1g' -> '3 x 1g', '4g+2g+2g' -> '4g+2 x 2g'.

    >>> counted("1g+1g+1g+1g+1g+1g+1g"), counted("4g+2g+2g")
    ('7 x 1g', '4g+2 x 2g')
    """
    return re.sub(r"\b(\w+)(?:\+\1\b)+", lambda m: f"{m.group(0).count('+') + 1} x {m.group(1)}", layout)


def colours(names: list[str]) -> dict[str, str]:
    """A colour per series: a sharing mode's own where the name says which (naive orange, MPS blue, ...), the
    palette's next free one otherwise, so that no two series of a figure share one.

    >>> colours(["MPS partitions 3g+3g", "MPS", "naive", "my mode"])
    {'MPS partitions 3g+3g': '#59a14f', 'MPS': '#4e79a7', 'naive': '#f28e2b', 'my mode': '#e15759'}
    """
    def kind(name: str) -> str | None:
        return next((c for prefix, c in MODE_COLOURS if name.lower().replace(" · ", " ").startswith(prefix)), None)

    out: dict[str, str] = {}
    for name in sorted(names, key=len):  # a plain mode ("MPS") before its variants ("MPS partitions 3g+3g")
        if kind(name) and kind(name) not in out.values():
            out[name] = kind(name)  # type: ignore[assignment]
    for name in names:
        if name not in out:
            out[name] = next((c for c in PALETTE if c not in out.values()), PALETTE[len(out) % len(PALETTE)])
    return {name: out[name] for name in names}


def facets(data: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The plots a figure of `data` splits into: one per workload (copies of one job) and one for the mixes, so
    that no plot holds every series; a single plot where there is one."""
    if "workloads" not in data or data["workloads"].nunique() <= 1:
        return [("", data)]
    mix = data["workloads"].astype(str).str.contains(" + ", regex=False)
    groups = [(str(w), rows) for w, rows in data[~mix].groupby("workloads", sort=True)]
    return groups + ([(MIXES, data[mix])] if mix.any() else [])


def grid(titles: list[str], title: str, shared_y: bool = True) -> go.Figure:
    """A figure of one plot per title, FACET_COLUMNS to a row, the legend below them all."""
    cols = min(FACET_COLUMNS, len(titles))
    rows = math.ceil(len(titles) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles if titles != [""] else None,
                        shared_yaxes="all" if shared_y else False, horizontal_spacing=0.06,
                        vertical_spacing=0.3 / rows if rows > 1 else 0.1)
    fig.update_annotations(font_size=12)
    fig.update_layout(title=title, template=TEMPLATE, height=FACET_HEIGHT_PX * rows + 190)
    return fig


def where(i: int) -> dict:
    """The row and column of facet `i` of a `grid`: what plotly's add_trace and update_xaxes take."""
    return {"row": i // FACET_COLUMNS + 1, "col": i % FACET_COLUMNS + 1}


def series(frame: pd.DataFrame) -> pd.Series:
    """The legend entry of each row: its mode as a legend says it (`short_label`), with its experiment where one
    workload ran under that mode in several experiments (workloads are facets, `facets`).

    >>> series(pd.DataFrame({"mode_label": ["naive", "naive"], "mode": ["naive"] * 2, "workloads": ["a", "a"],
    ...                      "experiment": ["03-naive", "07"]})).tolist()
    ['03-naive / naive', '07 / naive']
    """
    labels = frame["mode_label"].fillna(frame["mode"]).astype(str).map(short_label)
    if "experiment" in frame and frame["experiment"].nunique() > 1:
        workload = frame["workloads"].astype(str) if "workloads" in frame else pd.Series("", frame.index)
        several = frame.groupby([workload, labels])["experiment"].transform("nunique") > 1
        labels = labels.where(~several, frame["experiment"].astype(str) + " / " + labels)
    return labels


def category(value: float | str) -> str:
    """A category's text: 2 for 2.0, the value itself otherwise."""
    return str(int(value)) if _is_number(value) and float(value).is_integer() else str(value)


def in_order(values: pd.Series) -> list[str]:
    """The categories of an axis: numbers in numeric order (1, 2, 3, 7, never 3, 2, 1, 7), text in its order.

    >>> in_order(pd.Series([3, 2, 1, 7, 2]))
    ['1', '2', '3', '7']
    """
    unique = list(dict.fromkeys(values.dropna()))
    return [category(v) for v in (sorted(unique) if all(_is_number(v) for v in unique) else unique)]


def _is_number(value: object) -> bool:
    return pd.api.types.is_number(value) and not pd.api.types.is_bool(value)
