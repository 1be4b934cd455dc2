"""Every figure keeps a readable size, whatever it is given; MIG layouts show which job gets which instance; many
workloads make facets of few series, each mode one colour and one legend entry; mixes stand on their own axis (by
jobs); categories in numeric order; every axis says what it counts; legends below; a noisy figure says so."""

import copy
import functools
from collections import Counter

import pandas as pd
import plotly.io as pio
import pytest
from fake_results import fake_results, job_rows

from colloc_kit import reference
from colloc_kit.analysis import summaries as analysis
from colloc_kit.gpu import mig_planner as planner
from colloc_kit.views import plots
from colloc_kit.views import style
from colloc_kit.views.style import MAX_SERIES, MIXES

MIN_HEIGHT_PX = 250  # below this a figure collapses (a one-row MIG layout used to be 180 px: a line)
# what `_drawn` draws, named here so that collecting the tests draws none
FIGURES = ("throughput_vs_copies", "epoch_time_vs_copies", "gain_vs_growth", "metric_bars", "jobs_by_mode",
           "batch_size_curves", "memory_fit_figure", "mig_layouts one row", "mig_layouts three rows",
           "partition_shares", "job_metrics", "who_lost", "empty")


def figures() -> dict:
    """Every figure of the kit drawn from one small result set: a fresh copy of each for the test that asks."""
    return copy.deepcopy(_drawn())


@functools.cache
def _drawn() -> dict:
    """The figures, drawn once for the module (about 0.5 s a time; 27 tests ask): `figures` hands out copies."""
    results = fake_results(job_rows("a", "exclusive", 1, [100.0]) + job_rows("b", "naive", 2, [75.0, 75.0]))
    frame = analysis.with_baselines(results.jobs)
    summary = analysis.summarize(results)
    plan = planner.plan(["3g", "3g"], "H100-80GB")
    shares = pd.DataFrame([{"layout": "3g+3g", "partition": p, "thread_percentage": 43, "memory_limit_mb": 40000}
                           for p in ("a", "b")])
    drawn = {
        "throughput_vs_copies": plots.throughput_vs_copies(summary),
        "epoch_time_vs_copies": plots.epoch_time_vs_copies(summary),
        "gain_vs_growth": plots.gain_vs_growth(summary),
        "metric_bars": plots.metric_bars(summary, "normalized_throughput", "t", "y"),
        "jobs_by_mode": plots.jobs_by_mode(frame),
        "batch_size_curves": plots.batch_size_curves(frame),
        "memory_fit_figure": plots.memory_fit_figure(analysis.memory_fit(frame, {"card": 80000})),
        "mig_layouts one row": plots.mig_layouts({"3g+3g": plan}),
        "mig_layouts three rows": plots.mig_layouts({str(i): plan for i in range(3)}),
        "partition_shares": plots.partition_shares(shares),
        "job_metrics": plots.job_metrics(frame, ["sm_util_pct_mean"], "t", "%"),
        "who_lost": plots.who_lost(analysis.job_summary(results)),
        "empty": plots.empty("t", "nothing yet"),
    }
    assert tuple(drawn) == FIGURES, "FIGURES names every figure drawn here: each is tested"
    return drawn


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_is_tall_enough_to_read(name):
    fig = figures()[name]
    if name == "empty":
        assert fig.layout.annotations[0].text == "<b>t</b>: nothing yet"
    if fig.layout.height == style.EMPTY_HEIGHT_PX:  # nothing to draw (no monitored GPU): one line of words
        (note,) = fig.layout.annotations
        assert not fig.data and "_" not in note.text and "<br>" not in note.text
        return
    assert fig.layout.height is None or fig.layout.height >= MIN_HEIGHT_PX  # None: plotly's 450 px


def test_an_error_bar_never_reaches_below_zero_and_the_figure_says_it_was_cut():
    summary = pd.DataFrame({"mode": ["naive", "naive"], "mode_label": ["naive", "naive"], "copies": [1, 2],
                            "workloads": ["m", "m"], "normalized_throughput_mean": [1.0, 1.3],
                            "normalized_throughput_ci": [1.39, 0.2], "repeats": [3, 3], "flags": [None, None]})
    fig = plots.throughput_vs_copies(summary)
    bars = fig.data[0].error_y
    assert list(bars.arrayminus) == [1.0, 0.2] and list(bars.array) == [1.39, 0.2]  # 1.00 - 1.00 = 0, not -0.39
    assert any("cut at 0" in a.text for a in fig.layout.annotations)


def test_mig_blocks_are_coloured_by_model_with_a_legend():
    fig = plots.mig_layouts({"R152 + R50 as 1+2": planner.plan(["3g", "2g", "2g"], "H100-80GB")})
    assert [t.name for t in fig.data] == ["R152", "R50"] and fig.layout.showlegend
    fills = [shape.fillcolor for shape in fig.layout.shapes]
    assert fills[1] == fills[2] != fills[0]  # the two R50 instances share their model's colour


def test_layout_proposals_that_differ_only_by_assignment_look_different():
    first, second = planner.propose_layouts([3300, 1000], "H100-80GB", limit=2)
    labels = ["job 0 (3300 MB)", "job 1 (1000 MB)"]
    drawn = plots.mig_layouts({"option 1": first, "option 2": second}, job_labels=labels)
    on_instances = [a.text for a in drawn.layout.annotations if "SMs" in a.text]
    assert on_instances[:2] != on_instances[2:]  # same profiles, other jobs on them
    assert {t.split("<br>")[0] for t in on_instances} == set(labels)


@pytest.fixture(scope="module")
def h100():
    """The summary of the shipped H100 data: 13 workloads, the study's mixes, up to 9 ways of sharing."""
    return reference.summary("h100-80gb")  # analysis.summarize of its runs, kept between processes


def by_plot(fig) -> Counter:
    """How many series each plot (x axis) of a figure holds (not its guide lines, which have no hover)."""
    return Counter(trace.xaxis or "x" for trace in fig.data if trace.hoverinfo != "skip")


def many(summary):
    return {"gain": plots.throughput_vs_copies(summary), "epoch time": plots.epoch_time_vs_copies(summary),
            "gain vs growth": plots.gain_vs_growth(summary),
            "SM activity": plots.metric_bars(summary, "sm_util_pct", "SM activity", "SM active (%)")}


def test_figures_of_many_workloads_are_facets_of_few_series_each_mode_one_colour_and_legend_entry(h100):
    """Notebook 07 on the H100 data once drew 20+ series in one plot, plotly's 10 colours repeating."""
    for name, fig in many(h100).items():
        assert len(by_plot(fig)) >= 10, name  # a plot per workload, one for the mixes
        assert max(by_plot(fig).values()) <= MAX_SERIES, (name, by_plot(fig))
        entries = [t.name for t in fig.data if t.showlegend is not False]
        assert len(entries) == len(set(entries)) <= MAX_SERIES + 2, name  # each mode once: a short legend
        colour = {}
        for trace in (t for t in fig.data if t.hoverinfo != "skip"):
            drawn = trace.marker.color if trace.type == "bar" or "lines" not in trace.mode else trace.line.color
            assert colour.setdefault(trace.name, drawn) == drawn, (name, trace.name)  # the same in every plot
        assert len(set(colour.values())) == len(colour), name  # no two modes share a colour


def test_mixes_are_drawn_against_their_number_of_jobs_not_at_copies_1(h100):
    fig = plots.throughput_vs_copies(h100)
    assert MIXES in [a.text for a in fig.layout.annotations]  # the plot's title
    (axis,) = [name for name in fig.layout
               if name.startswith("xaxis") and fig.layout[name].title.text == "jobs in the mix"]
    points = [x for t in fig.data if (t.xaxis or "x") == axis.replace("axis", "") for x in t.x]
    assert min(points) > 1.5 and max(points) < 5.5  # the study's mixes have 2 to 5 jobs, none at "copies 1"
    low, high = fig.layout[axis].range  # every point inside the plot, with room for its marker
    assert low <= min(points) - 0.3 and high >= max(points) + 0.3, (fig.layout[axis].range, min(points), max(points))


def test_categories_of_copies_are_in_numeric_order():
    rows = [job_rows(f"r{n}", "naive", n, [50.0] * n) for n in (3, 2, 7)] + [job_rows("a", "exclusive", 1, [100.0])]
    summary = analysis.summarize(fake_results([r for run in rows for r in run]))
    fig = plots.metric_bars(summary, "normalized_throughput", "t", "gain (x one job alone)")
    assert list(fig.layout.xaxis.categoryarray) == ["1", "2", "3", "7"]
    drawn = plots.batch_size_curves(analysis.with_baselines(fake_results(
        job_rows("b", "exclusive", 1, [10.0], batch_size=64) + job_rows("c", "exclusive", 1, [12.0], batch_size=128)
    ).jobs))
    assert list(drawn.layout.xaxis.tickvals) == [64, 128] and drawn.layout.xaxis.type == "log"  # not 70-130


@pytest.mark.parametrize("name", [n for n in FIGURES if n not in ("empty", "mig_layouts one row",
                                                                   "mig_layouts three rows", "partition_shares")])
def test_every_axis_of_a_figure_has_a_title_with_what_it_counts(name):
    fig = figures()[name]
    used = {t.xaxis or "x" for t in fig.data} | {t.yaxis or "y" for t in fig.data}
    for axis in used:
        title = fig.layout[axis.replace("x", "xaxis").replace("y", "yaxis")].title.text
        if axis.startswith("y") and title is None:  # facets share the first column's y title
            continue
        assert title, (name, axis)
    assert not fig.data or fig.layout.yaxis.title.text, name  # a figure with nothing to draw says why instead


def test_the_kits_figures_put_their_legend_below_the_plot():
    legend = pio.templates[plots.TEMPLATE.split("+")[1]].layout.legend
    assert legend.orientation == "h" and legend.yref == "container" and legend.y == 0 and legend.yanchor == "bottom"
    assert all(plots.TEMPLATE == fig.layout.template or fig.layout.template.layout.legend.orientation == "h"
               for fig in figures().values())


def test_a_figure_the_noise_check_flags_is_greyed_and_says_it_is_no_result():
    fig = plots.noisy(figures()["throughput_vs_copies"], "identical jobs of one run differ 2.1x")
    assert fig.layout.title.text.endswith("(not a result: too noisy)")
    (box,) = [a for a in fig.layout.annotations if a.text.startswith("Not a result: identical jobs")]
    assert (box.yref, box.y, box.yanchor) == ("paper", 1, "bottom") and box.yshift > 0  # above the plot, not over it
    assert fig.layout.margin.t > style.TOP_MARGIN_PX  # room for it: the plot area keeps its height
    assert {t.marker.color for t in fig.data} == {"#c8c8c8"}
    unmarked = plots.noisy(figures()["gain_vs_growth"], None)
    assert unmarked.layout.title.text == "Throughput gain against per-job slowdown"
