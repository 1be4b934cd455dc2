"""The one noise rule (analysis.greying), on made-up rates (not measured): a page is greyed only where its gains lie
within the noise, a gain far outside it is drawn whatever the repeats' spread; baselines never pool modes; impossible
numbers (a training job faster shared than alone, a p99 lower shared than alone) are flagged always, on every page
(notebook 10 included)."""

import json
from pathlib import Path

import pandas as pd
from fake_results import fake_results, job_rows

from colloc_kit import analysis
from colloc_kit.analysis import greying
from colloc_kit.notebook import setup as notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def runs(lone: list[float], mode: str, repeats: list[list[float]]) -> pd.DataFrame:
    """Lone runs (exclusive, one job each) and repeats of one shared cell of `mode`."""
    rows = [row for k, rate in enumerate(lone) for row in job_rows(f"a{k}", "exclusive", 1, [rate])]
    rows += [{**row, "repeat": r} for r, rates in enumerate(repeats)
             for row in job_rows(f"{mode}{r}", mode, len(rates), rates)]
    return pd.DataFrame(rows)


def page(jobs: pd.DataFrame) -> tuple[str | None, str | None]:
    """What the noise check finds, and what greys the page (`notebook.noise_warning`), on these jobs."""
    results = fake_results(jobs.to_dict("records"))
    summary = analysis.summarize(results)
    return analysis.noise(results.jobs, summary), notebook.noise_warning(results.jobs, summary)


def test_a_gain_far_outside_the_noise_is_drawn_though_repeats_differ():
    """Notebook 04 on two H200s: MPS gains of about 2 greyed by a repeats' spread its own CIs leave far behind."""
    found, greys = page(runs([100.0] * 3, "mps", [[70.0] * 3, [55.0] * 3, [70.0] * 3]))  # gains 2.1, 1.65, 2.1
    assert found.startswith("repeats of one cell differ 1.27x") and greys is None


def test_gains_within_the_noise_grey_the_page():
    found, greys = page(runs([100.0] * 3, "mps", [[60.0] * 2, [45.0] * 2, [60.0] * 2]))  # gains 1.2, 0.9, 1.2
    assert found.startswith("repeats of one cell differ 1.33x") and greys == found


def test_the_edge_a_gains_ci_reaching_1_is_within_the_noise():
    summary = pd.DataFrame({"mode": ["mps"] * 4, "copies": [2, 2, 2, 1],
                            "normalized_throughput_mean": [1.25, 1.5, 0.75, 2.0],
                            "normalized_throughput_ci": [0.25] * 4})
    assert greying.outside_noise(summary).tolist() == [False, True, False, False]  # 1.0 to 1.5 reaches 1; one job


def test_baselines_never_pool_modes():
    """Notebook 03 on an H200: exclusive x1 (6,420 images/s) and naive x1 (5,318) pooled as one baseline (+-119 %)."""
    rows = [*job_rows("e0", "exclusive", 1, [6420.0]), *job_rows("e1", "exclusive", 1, [6400.0]),
            *job_rows("n0", "naive", 1, [5318.0])]  # one job time-sliced with nothing is a lone job too
    base = analysis.baselines(pd.DataFrame(rows))
    assert base[["baseline_images_per_s", "baseline_jobs", "baseline_mode"]].values.tolist() == [
        [6410.0, 2, "exclusive"]]
    relative = analysis.with_baselines(pd.DataFrame(rows)).set_index("run_id")["relative_throughput"]
    assert relative["n0"] == 5318.0 / 6410.0  # naive x1 against exclusive x1: no "gain" above 1 for exclusive x1


def test_a_job_faster_shared_than_alone_beyond_both_cis_is_flagged_whatever_the_gains():
    """Notebook 10 on the CPU: training 2.4x faster beside a server than alone, without a word."""
    jobs = runs([100.0] * 3, "naive", [[130.0, 60.0]]).assign(images_per_s_ci=2.0)  # j0 at 1.30 +- 2 %
    flagged = notebook.noise_warning(*page_frames(jobs))
    assert flagged.startswith("impossible numbers: smallcnn bs8 in t naive x2 trained 1.30x its lone speed (± 2 %)")
    assert greying.impossible(jobs) == flagged
    wide = runs([60.0, 100.0, 140.0], "naive", [[130.0, 60.0]]).assign(images_per_s_ci=2.0)  # lone run +-100 %
    assert greying.impossible_jobs(wide) is None


def page_frames(jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    results = fake_results(jobs.to_dict("records"))
    return results.jobs, analysis.summarize(results)


def test_a_p99_lower_shared_than_alone_beyond_both_cis_is_flagged():
    serve = {"role": "serve", "model": "resnet50", "job": "j0", "run_id": "r"}
    alone = {**serve, "alone": True, "latency_p99_ms": 30.0, "latency_p99_ms_lo": 28.0, "latency_p99_ms_hi": 33.0}
    lower = {**serve, "alone": False, "latency_p99_ms": 10.0, "latency_p99_ms_lo": 9.0, "latency_p99_ms_hi": 12.0}
    within = {**lower, "latency_p99_ms": 27.0, "latency_p99_ms_lo": 25.0, "latency_p99_ms_hi": 29.0}
    assert greying.impossible_latency(pd.DataFrame([alone, lower])).startswith(
        "impossible numbers: j0's p99 shared, 10.0 ms, is below its p99 alone beyond both CIs")
    assert greying.impossible_latency(pd.DataFrame([alone, within])) is None


def test_every_page_that_draws_gains_greys_them_by_this_rule_and_page_10_flags_impossible_numbers():
    sources = {n.name: "".join("".join(c["source"]) for c in json.loads(n.read_text())["cells"])
               for n in NOTEBOOKS.glob("*.ipynb")}
    for name in ("03_naive_collocation.ipynb", "04_mps_collocation.ipynb", "06_mixed_workloads.ipynb",
                 "07_analysis.ipynb"):
        assert "notebook.noise_warning(frame, summary)" in sources[name], name
    assert "greying.impossible(results.jobs)" in sources["10_training_beside_inference.ipynb"]
    assert notebook.noise_warning is greying.greyed


def test_a_lone_baselines_spread_and_jobs_with_other_workers_are_not_repeats_of_one_cell():
    """The H200 set's findings: 'repeats of one cell differ 1.49x', the twelve loader-bound lone runs of ResNet-152
    bf16 (a baseline, which scales every way of sharing alike); a cell's repeats are those of its jobs' workers."""
    twelve = [649.0, 751.0, 576.0, 733.0, 770.0, 641.0, 631.0, 851.0, 859.0, 853.0, 773.0, 684.0]  # the H200's
    lone = runs(twelve, "naive", [[360.0] * 2, [365.0] * 2])
    assert analysis.noise(lone) is None
    other = pd.DataFrame([{**row, "workers": 8, "run_id": "w8"} for row in job_rows("w8", "naive", 2, [90.0] * 2)])
    pooled = pd.concat([runs([100.0] * 3, "naive", [[60.0] * 2, [61.0] * 2]).assign(workers=4), other])
    assert analysis.noise(pooled) is None
    spread = pd.concat([pooled, other.assign(run_id="w8b", images_per_s=60.0, images_per_s_overlap=60.0)])
    assert analysis.noise(spread).startswith("repeats of one cell differ 1.50x in images/s "
                                             "(t naive x2: 2 x smallcnn bs8 8 workers, 2 repeats)")
