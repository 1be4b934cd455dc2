"""Analysis and plots on hand-made frames: baselines, normalized throughput, epoch-time growth, CIs, memory fit."""

import math

import pandas as pd
import plotly.graph_objects as go
import pytest

from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import Results
from colloc_kit.gpu.mig_planner import plan
from colloc_kit.views import plots

ALONE_MODES = {"exclusive"}


def results_of(jobs: pd.DataFrame, runs: dict | None = None) -> Results:
    """Results whose runs frame carries each run's aggregate as read_run would (the sum of its jobs' window rates)."""
    rows = []
    for run_id, run in jobs.groupby("run_id", sort=False):
        done = run[run["status"] == "complete"]
        rate = analysis.measured_rate(done)
        sequential = bool(run["sequential"].iloc[0])
        agg = float((rate * done["steady_s"]).sum() / done["steady_s"].sum()) if sequential else float(rate.sum())
        first = run.iloc[0]
        rows.append({**{k: first[k] for k in analysis.RUN_KEYS}, "n_jobs": len(run), "n_complete": len(done),
                     "aggregate_images_per_s": agg, "aggregate_images_per_s_ci": 0.01 * agg,
                     "throughput_window": "sequential" if sequential else "overlap", "window_s": 4.0,
                     "flags": None, "bound_by": "gpu", **(runs or {}).get(run_id, {})})
    return Results(jobs=jobs, epochs=pd.DataFrame(), runs=pd.DataFrame(rows))


def job(run_id, mode, copies, images_per_s, epoch_time_s, model="resnet18", batch_size=64, status="complete",
        repeat=0, peak_memory_mb=1000.0, steady_s=4.0, **extra):
    return {"run_id": run_id, "experiment": "e", "mode": mode, "mode_label": mode, "copies": copies, "repeat": repeat,
            "sequential": mode == "exclusive", "job": f"{run_id}-{extra.pop('i', 0)}", "slot_label": f"{mode}-0",
            "model": model, "dataset": "synthetic", "data_root": None, "image_size": 224,
            "batch_size": batch_size, "amp": "bf16", "recipe": "kit", "device": "cuda", "status": status,
            "images_per_s": images_per_s, "epoch_time_s": epoch_time_s, "peak_memory_mb": peak_memory_mb,
            "steady_s": steady_s, "step_time_s": batch_size / images_per_s if images_per_s else None,
            "alone": mode == "exclusive" or extra.pop("alone", False), **extra}


@pytest.fixture
def jobs():
    rows = [
        job("alone", "exclusive", 1, 1000.0, 10.0),
        job("alone2", "exclusive", 1, 1000.0, 10.0, model="resnet50", peak_memory_mb=3000.0),
        job("n2", "naive", 2, 800.0, 12.5, i=0, sm_util_pct_mean=80.0, energy_per_image_j=0.2),
        job("n2", "naive", 2, 700.0, 14.0, i=1, sm_util_pct_mean=80.0, energy_per_image_j=0.2),
        job("m2", "mps", 2, 900.0, 11.0, i=0, sm_util_pct_mean=90.0),
        job("m2", "mps", 2, None, None, i=1, status="failed"),
        job("mix", "naive", 1, 500.0, 20.0, i=0),
        job("mix", "naive", 1, 600.0, 16.0, i=1, model="resnet50"),
    ]
    return pd.DataFrame(rows)


def test_baselines_come_from_jobs_that_ran_alone(jobs):
    base = analysis.baselines(jobs).set_index("model")
    assert base.loc["resnet18", "baseline_images_per_s"] == 1000.0
    assert base.loc["resnet50", "baseline_peak_memory_mb"] == 3000.0
    # the two-job mixed run is not a baseline although its copies count is 1
    assert base.loc["resnet50", "baseline_jobs"] == 1


def test_normalized_throughput_sums_relative_rates_of_complete_jobs(jobs):
    runs = analysis.run_summary(results_of(jobs)).set_index("run_id")
    assert runs.loc["n2", "normalized_throughput"] == pytest.approx(1.5)
    assert runs.loc["n2", "aggregate_images_per_s"] == pytest.approx(1500.0)
    assert runs.loc["n2", "epoch_time_growth"] == pytest.approx((1000 / 800 + 1000 / 700) / 2)
    assert runs.loc["m2", "n_complete"] == 1 and runs.loc["m2", "normalized_throughput"] == pytest.approx(0.9)
    assert runs.loc["mix", "normalized_throughput"] == pytest.approx(0.5 + 0.6)
    assert runs.loc["mix", "jobs_label"] == "resnet18 bs64 bf16 + resnet50 bs64 bf16"
    assert runs.loc["n2", "energy_per_image_j"] == pytest.approx(0.2)
    assert math.isnan(runs.loc["m2", "energy_per_image_j"])


def test_an_exclusive_run_averages_its_jobs_in_turn_instead_of_adding_them(jobs):
    """Two jobs trained one after another (6 s and 2 s steady) did one job's worth of work at a time."""
    jobs = pd.concat([jobs, pd.DataFrame([job("seq", "exclusive", 1, 1000.0, 10.0, i=0, steady_s=6.0),
                                          job("seq", "exclusive", 1, 600.0, 16.0, i=1, model="resnet50",
                                              steady_s=2.0)])],
                     ignore_index=True)
    runs = analysis.run_summary(results_of(jobs)).set_index("run_id")
    assert runs.loc["seq", "aggregate_images_per_s"] == pytest.approx((1000 * 6 + 600 * 2) / 8)
    # resnet50's baseline is the mean of its two lone jobs, 1000 and 600: relative rate 600 / 800
    assert runs.loc["seq", "normalized_throughput"] == pytest.approx((1.0 * 6 + 0.75 * 2) / 8)


def test_overlap_rate_is_preferred_over_own_rate(jobs):
    jobs["images_per_s_overlap"] = [None, None, 500.0, 500.0, None, None, None, None]
    runs = analysis.run_summary(results_of(jobs)).set_index("run_id")
    assert runs.loc["n2", "normalized_throughput"] == pytest.approx(1.0)


def test_no_baseline_gives_nan_not_a_wrong_number(jobs):
    only_collocated = jobs[jobs["mode"] != "exclusive"]
    runs = analysis.run_summary(results_of(only_collocated)).set_index("run_id")
    assert math.isnan(runs.loc["n2", "normalized_throughput"])
    # a one-job naive run is a baseline (results.py marks it alone, as the mode says)
    solo = pd.DataFrame([job("s", "naive", 1, 400.0, 5.0, alone=True), job("t", "naive", 2, 300.0, 6.0, i=0),
                         job("t", "naive", 2, 300.0, 6.0, i=1)])
    runs = analysis.run_summary(results_of(solo)).set_index("run_id")
    assert runs.loc["t", "normalized_throughput"] == pytest.approx(1.5)


def test_epoch_time_growth_is_the_baseline_rate_over_the_job_rate(jobs):
    jobs["epoch_time_s"] = None  # no whole epoch needed: an epoch is a fixed number of images
    runs = analysis.run_summary(results_of(jobs)).set_index("run_id")
    assert runs.loc["n2", "epoch_time_growth"] == pytest.approx((1000 / 800 + 1000 / 700) / 2)


def test_summarize_averages_repeats(jobs):
    extra = pd.DataFrame([job("n2b", "naive", 2, 600.0, 15.0, i=0, repeat=1),
                          job("n2b", "naive", 2, 600.0, 15.0, i=1, repeat=1)])
    summary = analysis.summarize(results_of(pd.concat([jobs, extra], ignore_index=True)))
    row = summary[(summary["mode"] == "naive") & (summary["copies"] == 2)].iloc[0]
    assert row["repeats"] == 2
    assert row["normalized_throughput_mean"] == pytest.approx((1.5 + 1.2) / 2)
    assert row["normalized_throughput_std"] > 0


def test_memory_fit_uses_the_steady_footprint_with_a_margin_not_the_peak(jobs):
    jobs["steady_gpu_memory_mb"] = [900.0, 2500.0] + [None] * 6
    fit = analysis.memory_fit(jobs, {"card": 10_000, "1g": 2_500}).set_index(["model", "capacity"])
    assert fit.loc[("resnet18", "card"), "copies_fit"] == 10  # 10,000 x 0.95 // 900; the 1,000 MB peak would say 10 too
    assert fit.loc[("resnet50", "card"), "copies_fit"] == 3  # 9,500 // 2,500 (the 3,000 MB peak would say 3)
    assert fit.loc[("resnet50", "1g"), "copies_fit"] == 0
    jobs["steady_gpu_memory_mb"] = None
    fit = analysis.memory_fit(jobs, {"card": 10_000})
    assert fit["copies_fit"].isna().all() and "no steady GPU memory" in fit["note"].iloc[0]


def test_empty_frames_give_empty_results_and_explaining_figures():
    empty = pd.DataFrame(columns=list(job("x", "naive", 1, 1.0, 1.0)))
    summary = analysis.summarize(results_of(empty))
    assert summary.empty
    fig = plots.throughput_vs_copies(summary)
    assert "not drawn: no run here measured gain" in fig.layout.annotations[0].text


def test_figures_carry_one_trace_per_mode(jobs):
    one_model = jobs[~jobs["run_id"].isin(["alone2", "mix"])]
    summary = analysis.summarize(results_of(one_model))
    fig = plots.throughput_vs_copies(summary)
    assert {t.name for t in fig.data} == {"exclusive", "naive", "MPS"}
    several = plots.throughput_vs_copies(analysis.summarize(results_of(jobs)))  # a mix too: a plot of its own
    assert [a.text for a in several.layout.annotations] == ["resnet18 bs64 bf16", "resnet50 bs64 bf16",
                                                            "mixes of workloads"]
    assert {t.name for t in several.data} == {"exclusive", "naive", "MPS"}  # one legend entry per mode
    assert isinstance(plots.gain_vs_growth(summary), go.Figure)
    summary = analysis.summarize(results_of(jobs))
    util = plots.metric_bars(summary, "sm_util_pct", "SM", "%")
    assert {t.name for t in util.data} == {"naive", "MPS"}  # only resnet18 runs were monitored
    stacked = plots.jobs_by_mode(analysis.with_baselines(jobs))
    assert {t.name for t in stacked.data} == {"resnet18 bs64 bf16", "resnet50 bs64 bf16"}


def test_mig_layouts_draw_one_box_per_instance_and_name_idle_compute_slices():
    fig = plots.mig_layouts({"2x3g": plan("3g,3g", "H100-80GB"), "7x1g": plan(["1g"] * 7, "H100-80GB")})
    assert len(fig.layout.shapes) == 9
    assert [a.text for a in fig.layout.annotations if "idle" in a.text] == ["1 compute slice idle"]


def test_job_metrics_explain_missing_gpu_metrics(jobs):
    fig = plots.job_metrics(jobs, ["sm_occupancy_pct_mean"], "idle", "%")
    assert "monitored GPU" in fig.layout.annotations[0].text
    fig = plots.job_metrics(jobs, ["sm_util_pct_mean"], "idle", "%")
    assert list(fig.data[0].x) == ["resnet18 bs64 bf16"] and list(fig.data[0].y) == [pytest.approx(250 / 3)]
