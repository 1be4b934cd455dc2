"""Every figure keeps a readable size, whatever it is given; MIG layouts show which job gets which instance."""

import pandas as pd
import pytest

from colloc_kit import analysis, plots
from colloc_kit.gpu import mig_planner as planner
from fake_results import fake_results, job_rows

MIN_HEIGHT_PX = 250  # below this a figure collapses (a one-row MIG layout used to be 180 px: a line)


def figures():
    results = fake_results(job_rows("a", "exclusive", 1, [100.0]) + job_rows("b", "naive", 2, [75.0, 75.0]))
    frame = analysis.with_baselines(results.jobs)
    summary = analysis.summarize(results)
    plan = planner.plan(["3g", "3g"], "H100-80GB")
    shares = pd.DataFrame([{"layout": "3g+3g", "partition": p, "thread_percentage": 43, "memory_limit_mb": 40000}
                           for p in ("a", "b")])
    return {
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


@pytest.mark.parametrize("name", list(figures()))
def test_every_figure_is_tall_enough_to_read(name):
    fig = figures()[name]
    assert fig.layout.height is None or fig.layout.height >= MIN_HEIGHT_PX  # None: plotly's 450 px


def test_layout_proposals_that_differ_only_by_assignment_look_different():
    first, second = planner.propose_layouts([3300, 1000], "H100-80GB", limit=2)
    labels = ["job 0 (3300 MB)", "job 1 (1000 MB)"]
    drawn = plots.mig_layouts({"option 1": first, "option 2": second}, job_labels=labels)
    on_instances = [a.text for a in drawn.layout.annotations if "SMs" in a.text]
    assert on_instances[:2] != on_instances[2:]  # same profiles, other jobs on them
    assert {t.split("<br>")[0] for t in on_instances} == set(labels)
