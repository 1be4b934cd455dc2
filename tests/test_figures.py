"""Each figure defined once (colloc_kit.analysis.figures): its edge cases, and one number wherever it is shown."""

import math

import pytest

import colloc_kit
from colloc_kit.analysis import figures
from colloc_kit.analysis import summaries as analysis
from colloc_kit.cli import main as cli
from colloc_kit.notebook.panel import ExperimentPanel
from colloc_kit.views import tables


def interval(t, seconds=1.0, images=100, warmup=False, held=False, wait=0.0):
    return {"type": "interval", "t": t, "interval_s": seconds, "interval_images": images, "warmup": warmup,
            "held": held, "data_wait_s": wait}


def steady(start, end, rate=100.0, held_from=None):
    """One-second intervals from start to end at `rate` images/s; those after `held_from` are held."""
    return [interval(t, images=rate, held=held_from is not None and t > held_from) for t in range(start + 1, end + 1)]


def test_the_common_window_runs_from_the_last_warmup_end_to_the_first_stop():
    window = figures.common_window({"a": steady(0, 10), "b": steady(2, 8)})
    assert (window.start, window.end, window.note) == (2, 8, None)


def test_the_common_window_ends_with_the_first_measured_window_and_a_stall_after_it_does_not_count():
    """Around a window's end jobs synchronise, report and wait to be stopped: on the H100 a worker that loaded scipy
    there stalled every job for about a second, in held steps that the window used to include (-6 % aggregates)."""
    def measured_then_stalled(end):
        return steady(0, end, rate=800) + [interval(end + 1, seconds=1.0, images=128, held=True)]

    streams = {"a": measured_then_stalled(15), "b": measured_then_stalled(15)}
    out = figures.run_throughput(streams, {"a": "complete", "b": "complete"}, sequential=False)
    assert (out["window_start"], out["window_end"]) == (0, 15)
    assert out["aggregate_images_per_s"] == pytest.approx(1600)


def test_a_failed_job_contributes_what_it_trained_inside_the_window():
    streams = {"ok": steady(0, 10, rate=900), "failed": steady(0, 6, rate=800)}  # failed at t=6
    out = figures.run_throughput(streams, {"ok": "complete", "failed": "failed"}, sequential=False)
    assert out["window_end"] == 6 and out["aggregate_images_per_s"] == pytest.approx(1700)
    assert out["throughput_window"] == "overlap"
    assert "1 of 2 jobs did not complete" in figures.run_flags(out, 2, 1)


def test_a_job_that_never_reached_steady_state_is_left_out_and_named():
    streams = {"ok": steady(0, 10), "died": [interval(1, warmup=True)]}
    out = figures.run_throughput(streams, {"ok": "complete", "died": "failed"}, sequential=False)
    assert out["aggregate_images_per_s"] == pytest.approx(100)
    assert "died never reached steady state" in out["window_note"]


def test_intervals_that_straddle_the_window_count_pro_rata():
    """A job whose intervals are longer than the window still has a rate in it (no 'no interval inside' case)."""
    coarse = [interval(4, seconds=4, images=400), interval(8, seconds=4, images=400)]
    streams = {"fine": steady(3, 7, rate=50), "coarse": coarse}
    out = figures.run_throughput(streams, {"fine": "complete", "coarse": "complete"}, sequential=False)
    assert out["job_rates"]["coarse"] == pytest.approx(100) and out["aggregate_images_per_s"] == pytest.approx(150)


def test_no_common_window_falls_back_to_own_rates_and_says_it_is_not_comparable():
    streams = {"a": steady(0, 3), "b": steady(5, 9, rate=200)}
    out = figures.run_throughput(streams, {"a": "complete", "b": "complete"}, sequential=False)
    assert out["throughput_window"] == "own" and out["aggregate_images_per_s"] == pytest.approx(300)
    assert figures.run_flags(out, 2, 2).startswith("not comparable")


def test_a_short_window_is_flagged():
    out = figures.run_throughput({"a": steady(0, 5), "b": steady(4, 9)}, {"a": "complete", "b": "complete"}, False)
    assert "common window only 1.0 s" in figures.run_flags(out, 2, 2)


def test_sequential_runs_count_measured_time_only_not_held_steps():
    streams = {"a": steady(0, 6, rate=1000, held_from=4), "b": steady(10, 12, rate=600)}
    out = figures.run_throughput(streams, {"a": "complete", "b": "complete"}, sequential=True)
    assert out["aggregate_images_per_s"] == pytest.approx((1000 * 4 + 600 * 2) / 6)
    assert out["throughput_window"] == "sequential"


def test_ci95_uses_students_t_and_is_unknown_below_two_values():
    mean, hw = figures.ci95([10.0, 12.0])
    assert mean == 11.0 and hw == pytest.approx(12.706 * math.sqrt(2) / math.sqrt(2), rel=1e-3)
    assert math.isnan(figures.ci95([5.0])[1])
    assert figures.wide(100.0, 3.5) and not figures.wide(100.0, 2.5) and not figures.wide(100.0, math.nan)


@pytest.mark.parametrize("args, verdict", [
    (("cuda", 0.5, 0.0, 90.0, 10.0), "input"),
    (("cuda", 0.0, 0.5, 90.0, 10.0), "host"),
    (("cuda", 0.0, 0.05, 20.0, 10.0), "host"),  # busy, but small kernels fill few SMs
    (("cuda", 0.0, 0.0, 90.0, 70.0), "memory"),
    (("cuda", 0.0, 0.0, 90.0, 40.0), "gpu"),
    (("cpu", 0.0, None, None, None), "cpu"),
    (("cuda", None, None, None, None), None),
])
def test_bound_by_verdicts(args, verdict):
    assert figures.bound_by(*args) == verdict


def test_memory_fit_keeps_a_margin():
    assert figures.copies_fit(10_000, 950.0) == 10 and figures.copies_fit(10_000, 1000.0) == 9
    assert figures.copies_fit(10_000, None) is None


@pytest.mark.slow
def test_cli_table_load_analysis_and_panel_show_one_aggregate_and_one_normalized_figure(tmp_path, capsys):
    """A real tiny CPU experiment, read four ways."""
    job = {"model": "smallcnn", "device": "cpu", "image_size": 16, "batch_size": 8, "synthetic_samples": 64,
           "workers": 0, "warmup_steps": 2, "steps": 12, "interval_s": 0.05}
    results = colloc_kit.run([job], mode=["exclusive", "naive"], copies=[1, 2], out=tmp_path, monitor=False,
                             progress=False)
    loaded = colloc_kit.load(tmp_path)
    summary = analysis.run_summary(loaded).set_index("run_id")
    for run in results.runs.itertuples():
        assert summary.loc[run.run_id, "aggregate_images_per_s"] == pytest.approx(run.aggregate_images_per_s)
    assert cli.main(["show", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for value in results.runs["aggregate_images_per_s"]:
        assert f"{value:,.2f}" in printed
    assert "gains (x one job alone; 95 % CI)" in printed  # each configuration's gain, as the notebooks draw it
    for row in analysis.summarize(loaded).dropna(subset=["normalized_throughput_mean"]).itertuples():
        assert tables.number(row.normalized_throughput_mean) in printed
    panel = ExperimentPanel(models=["smallcnn"], job=job, run_fn=lambda *a, **k: loaded)
    panel.add(loaded)
    drawn = analysis.summarize(panel.results).set_index(["mode_label", "copies"])
    ours = analysis.summarize(loaded).set_index(["mode_label", "copies"])
    assert drawn["normalized_throughput_mean"].to_dict() == pytest.approx(ours["normalized_throughput_mean"].to_dict())
    naive2 = ours.loc[("naive", 2)]
    assert naive2["normalized_throughput_mean"] > 0 and naive2["normalized_throughput_ci"] >= 0
