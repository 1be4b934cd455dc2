"""Fairness and shares: Jain's index, each job's slowdown and who lost, in `load().runs`, `analysis`, the plots and
the findings; a real CPU run with one job starved by a throttle (real processes); a job's configured share beside the
share it had; noise judged from repeats and baselines, never from identical jobs of one run."""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import colloc_kit
from colloc_kit import findings
from colloc_kit.analysis import fairness, greying
from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import Results, derive
from colloc_kit.notebook import setup as notebook
from colloc_kit.views import plots

TINY = dict(model="smallcnn", device="cpu", batch_size=8, image_size=32, workers=0, warmup_steps=2, interval_s=0.2,
            synthetic_samples=64)


# -- Jain's index ------------------------------------------------------------------------------------------------

def test_jains_index_is_one_when_all_are_equal_and_one_over_n_when_one_has_everything():
    assert fairness.jain_index([0.7] * 5) == pytest.approx(1.0)
    assert fairness.jain_index([2.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # (0.9 + 0.45 + 0.45)^2 / (3 (0.81 + 0.2025 + 0.2025)) = 3.24 / 3.645
    assert fairness.jain_index([0.9, 0.45, 0.45]) == pytest.approx(3.24 / 3.645)
    assert fairness.jain_index([1.0, 0.5]) == pytest.approx(2.25 / 2.5)


def test_jains_index_ignores_scale_and_missing_values_and_refuses_negative_ones():
    assert fairness.jain_index([3.0, 1.0]) == pytest.approx(fairness.jain_index([0.3, 0.1]))
    assert fairness.jain_index([1.0, None, float("nan"), 1.0]) == pytest.approx(1.0)
    assert math.isnan(fairness.jain_index([])) and math.isnan(fairness.jain_index([0.0, 0.0]))
    with pytest.raises(ValueError, match="non-negative"):
        fairness.jain_index([1.0, -0.1])


# -- a fixture of load()'s frames ---------------------------------------------------------------------------------

def job(run_id, mode, label, rate, i=0, model="resnet18", alone=False, sequential=False, status="complete", **slot):
    return {"run_id": run_id, "experiment": "e", "mode": mode, "mode_label": label, "copies": 1, "repeat": 0,
            "sequential": sequential, "alone": alone, "job": f"j{i}-{model}", "slot_label": f"{mode}-{i}",
            "model": model, "dataset": "synthetic", "data_root": None, "image_size": 224, "batch_size": 64,
            "amp": "bf16", "recipe": "kit", "device": "cuda", "status": status, "images_per_s": rate,
            "images_per_s_overlap": None if alone else rate, "steady_s": 4.0, "peak_memory_mb": 1000.0,
            "gpu_name": "NVIDIA H100 80GB HBM3", **slot}


def results_of(rows: list[dict]) -> Results:
    jobs = pd.DataFrame(rows)
    runs = jobs.groupby(["run_id", "experiment", "mode", "mode_label", "copies", "repeat"], sort=False)[
        "images_per_s"].sum().rename("aggregate_images_per_s").reset_index()
    runs = runs.assign(aggregate_images_per_s_ci=0.0, flags=None, bound_by=None, n_jobs=2, n_complete=2)
    return derive(Results(jobs=jobs, epochs=pd.DataFrame(), runs=runs))


@pytest.fixture
def shared():
    """ResNet-18 alone at 1,000 and ResNet-50 alone at 500 img/s; a naive and an MPS run of both, an MPS-partition run
    (4g + 2g) and a MIG run (3g + 3g on the H100)."""
    return results_of([
        job("alone", "exclusive", "exclusive", 1000.0, alone=True, sequential=True),
        job("alone", "exclusive", "exclusive", 500.0, i=1, model="resnet50", alone=True, sequential=True),
        job("naive", "naive", "naive", 450.0), job("naive", "naive", "naive", 250.0, i=1, model="resnet50"),
        job("mps", "mps", "mps", 800.0), job("mps", "mps", "mps", 100.0, i=1, model="resnet50"),
        job("part", "mps", "mps(partitions=4g+2g)", 700.0, slot_thread_percentage=57.0),
        job("part", "mps", "mps(partitions=4g+2g)", 100.0, i=1, model="resnet50", slot_thread_percentage=28.0),
        job("mig", "mig", "mig(layout=3g.40gb+3g.40gb)", 500.0, slot_profile="3g.40gb"),
        job("mig", "mig", "mig(layout=3g.40gb+3g.40gb)", 200.0, i=1, model="resnet50", slot_profile="3g.40gb"),
    ])


def test_load_puts_each_runs_fairness_and_each_jobs_slowdown_beside_its_figures(shared):
    runs = shared.runs.set_index("run_id")
    assert runs.loc["naive", "fairness_index"] == pytest.approx(fairness.jain_index([0.45, 0.5]))
    assert runs.loc["mps", "fairness_index"] == pytest.approx(fairness.jain_index([0.8, 0.2]))
    assert runs.loc["mps", "fairness_index"] < runs.loc["naive", "fairness_index"]
    assert runs.loc["mps", "least_served"] == "j1-resnet50" and runs.loc["mps", "slowdown_max"] == pytest.approx(5.0)
    assert runs.loc["mps", "slowdowns"] == "j0-resnet18 1.25x, j1-resnet50 5.00x"
    assert math.isnan(runs.loc["alone", "fairness_index"])  # jobs one after another shared nothing
    jobs = shared.jobs.set_index(["run_id", "job"])
    assert jobs.loc[("mps", "j1-resnet50"), "epoch_time_growth"] == pytest.approx(5.0)  # lone / collocated


def test_a_run_without_a_lone_baseline_has_no_index_and_says_for_whom(shared):
    lacking = results_of([job("naive", "naive", "naive", 450.0), job("naive", "naive", "naive", 250.0, i=1)])
    run = lacking.runs.iloc[0]
    assert math.isnan(run["fairness_index"]) and "no lone baseline for j0-resnet18, j1-resnet18" in run["fairness_note"]


def test_a_job_that_never_trained_in_the_window_is_left_out_and_named():
    results = results_of([job("alone", "exclusive", "exclusive", 1000.0, alone=True, sequential=True),
                          job("r", "naive", "naive", 500.0), job("r", "naive", "naive", 400.0, i=1),
                          {**job("r", "naive", "naive", None, i=2, status="failed"), "images_per_s_overlap": None}])
    run = results.runs.set_index("run_id").loc["r"]
    assert run["fairness_index"] == pytest.approx(fairness.jain_index([0.5, 0.4]))
    assert run["fairness_note"] == "j2-resnet18 left out: did not train in the common window"


def test_analysis_carries_fairness_per_run_and_per_configuration_and_a_table_per_job(shared):
    per_run = analysis.run_summary(shared).set_index("run_id")
    assert per_run.loc["mps", "fairness_index"] == pytest.approx(shared.runs.set_index("run_id").loc["mps",
                                                                                                        "fairness_index"])
    summary = analysis.summarize(shared).set_index("mode_label")
    assert summary.loc["mps", "fairness_index_mean"] == pytest.approx(fairness.jain_index([0.8, 0.2]))
    assert summary.loc["mps", "slowdown_max_mean"] == pytest.approx(5.0)
    table = analysis.job_summary(shared)
    assert set(table["mode_label"]) == {"naive", "mps", "mps(partitions=4g+2g)", "mig(layout=3g.40gb+3g.40gb)"}
    loser = table[table["mode_label"] == "mps"].set_index("job").loc["j1-resnet50"]
    assert loser["relative_throughput_mean"] == pytest.approx(0.2) and loser["epoch_time_growth_mean"] == 5.0


def test_borrowed_baselines_give_the_borrowed_fairness(shared):
    no_lone = Results(jobs=shared.jobs[shared.jobs["run_id"] != "alone"], epochs=pd.DataFrame(),
                      runs=shared.runs[shared.runs["run_id"] != "alone"])
    own = analysis.run_summary(no_lone).set_index("run_id")
    borrowed = analysis.run_summary(no_lone, reference=shared.jobs).set_index("run_id")
    assert math.isnan(own.loc["mps", "fairness_index"])
    assert borrowed.loc["mps", "fairness_index"] == pytest.approx(fairness.jain_index([0.8, 0.2]))


# -- asked vs had ---------------------------------------------------------------------------------------------------

def test_the_share_asked_is_the_thread_percentage_or_the_mig_instances_sms_over_the_cards():
    h100 = "NVIDIA H100 80GB HBM3"
    assert fairness.asked_share_pct({"slot_thread_percentage": 28.0}) == 28.0
    assert fairness.asked_share_pct({"slot_profile": "3g.40gb"}, h100) == pytest.approx(100 * 60 / 132)
    assert fairness.asked_share_pct({"slot_profile": "1g.10gb", "slot_thread_percentage": 50.0}, h100) == \
        pytest.approx(100 * 16 / 132 * 0.5)  # MPS inside a MIG instance
    assert fairness.asked_share_pct({"slot_profile": "3g.40gb"}, "Some GPU without a MIG table") is None
    assert fairness.asked_share_pct({"slot_label": "naive-0", "slot_thread_percentage": float("nan")}) is None


def test_each_job_given_a_share_has_the_share_it_had_beside_it(shared):
    jobs = shared.jobs.set_index(["run_id", "job"])
    assert jobs.loc[("part", "j0-resnet18"), ["share_asked_pct", "share_had_pct"]].tolist() == pytest.approx([57, 70])
    assert jobs.loc[("part", "j1-resnet50"), ["share_asked_pct", "share_had_pct"]].tolist() == pytest.approx([28, 20])
    assert jobs.loc[("mig", "j1-resnet50"), "share_had_pct"] == pytest.approx(40.0)
    assert jobs.loc[("mps", "j0-resnet18"), ["share_asked_pct", "share_had_pct"]].isna().all()  # no share asked
    table = analysis.job_summary(shared)
    part = table[table["mode_label"] == "mps(partitions=4g+2g)"].set_index("job")
    assert part.loc["j1-resnet50", ["share_asked_pct", "share_had_pct_mean"]].tolist() == pytest.approx([28, 20])


# -- noise: repeats and baselines, not identical jobs -----------------------------------------------------------------

def noisy_jobs(second_repeat: float, alone: list[float] | None = None) -> pd.DataFrame:
    rows = [job(f"r{r}", "naive", "naive", rate, i=i) for r, rates in enumerate([[100.0, 40.0], [second_repeat, 40.0]])
            for i, rate in enumerate(rates)]
    rows += [job(f"a{k}", "exclusive", "exclusive", rate, alone=True, sequential=True)
             for k, rate in enumerate(alone or [])]
    return pd.DataFrame(rows).assign(copies=2)


def test_identical_jobs_of_one_run_that_differ_are_fairness_not_noise():
    assert analysis.noise(noisy_jobs(100.0)) is None  # j0 and j1 differ 2.5x, twice alike
    assert notebook.noise_warning is greying.greyed  # the pages' and the panel's: the one noise rule over it
    assert notebook.noise_warning(noisy_jobs(100.0)) is None


def test_repeats_of_one_cell_that_differ_are_noise():
    warning = analysis.noise(noisy_jobs(160.0))  # 140 against 200 img/s
    assert warning.startswith("repeats of one cell differ 1.43x in images/s (e naive x2: 2 x resnet18 bs64 bf16, "
                              "2 repeats)")


def test_a_lone_baseline_known_only_roughly_is_noise():
    assert analysis.noise(noisy_jobs(100.0, alone=[1000.0, 1010.0])) is None
    warning = analysis.noise(noisy_jobs(100.0, alone=[1000.0, 1400.0]))  # t(1) = 12.7: a CI of +-2,540
    assert "the lone run of resnet18 bs64 bf16 in e is known only to ± 212 % (95 % CI over 2 lone jobs)" in warning


def test_n_copies_gaining_more_than_n_jobs_alone_is_still_a_window_too_short():
    summary = pd.DataFrame({"copies": [1, 2], "normalized_throughput_mean": [1.0, 60.0]})
    assert analysis.noise(noisy_jobs(100.0), summary).startswith(
        "x2 trained 60.0x one job alone, more than sharing can give (2 jobs at once can give at most 2x)")
    assert analysis.noise(noisy_jobs(100.0), summary.assign(normalized_throughput_mean=[1.0, 1.9])) is None


# -- the plot and the findings ----------------------------------------------------------------------------------------

def test_who_lost_draws_one_series_per_way_of_sharing_with_each_job_as_a_marker(shared):
    table = analysis.job_summary(shared)
    fig = plots.who_lost(table[table["mode_label"].isin(["naive", "mps"])])
    assert [trace.name for trace in fig.data] == ["MPS", "naive"]  # the kit's short labels
    mps = fig.data[0]
    assert sorted(mps.y) == pytest.approx([0.2, 0.8]) and list(mps.text) == ["resnet18", "resnet50"]
    assert "slowdown 5.00x" in mps.hovertext[1] and "Jain index" in mps.hovertext[1]
    assert "relative to alone" in fig.layout.yaxis.title.text
    low, high = fig.layout.xaxis.range  # a name left of the first marker stays inside the plot, off the y ticks
    assert low <= -0.8 and high >= len(set(mps.x)) - 0.2
    assert "needs jobs that shared" in plots.who_lost(table.iloc[0:0]).layout.annotations[0].text


def seed_37(rates: dict[str, list[tuple[str, float]]], alone: dict[str, float]) -> Results:
    """Made-up runs of experiment seed-37 (rates chosen by the test): {mode: [(model, images/s), ...]}."""
    rows = [job(f"lone-{m}", "exclusive", "exclusive", r, i=i, model=m, alone=True, sequential=True)
            for i, (m, r) in enumerate(alone.items())]
    rows += [job(mode, mode, mode, r, i=i, model=m) for mode, jobs in rates.items() for i, (m, r) in enumerate(jobs)]
    return results_of([{**row, "experiment": "seed-37", "amp": "off", "recipe": "seed"} for row in rows])


@pytest.mark.slow
def test_the_findings_name_the_least_fair_cells_and_who_lost_under_naive_and_mps():
    results = seed_37({"naive": [("timm.resnet152", 300.0), ("timm.resnet26", 700.0)],
                       "mps": [("timm.resnet152", 100.0), ("timm.resnet26", 900.0)]},
                      {"timm.resnet152": 400.0, "timm.resnet26": 1000.0})
    found = findings.fairness_findings(results)
    worst = found["least_fair"].iloc[0]
    assert (worst["cell"], worst["sharing"]) == ("R152 + R26 as 1+1", "MPS")
    assert worst["slowdowns"] == "R152 4.00x, R26 1.11x"
    assert worst["Jain index"] == f"{fairness.jain_index([0.25, 0.9]):.3f}"
    assert "MPS was fairer in 0, naive in 1" in found["shows"]
    assert found["evidence"] == [f"seed-37 R152 + R26 as 1+1: naive {fairness.jain_index([0.75, 0.7]):.3f} (R26 1.43x "
                                 f"lost most), MPS {fairness.jain_index([0.25, 0.9]):.3f} (R152 4.00x)"]
    text = findings.markdown(results, "H100-80GB", source="a test")
    assert "## Fairness: who lost when jobs shared" in text and "| seed-37 | R152 + R26 as 1+1 | MPS |" in text


def test_the_findings_show_the_share_each_partition_asked_and_had():
    results = seed_37({"mps": [("timm.resnet152", 300.0), ("timm.resnet50", 250.0)]},
                      {"timm.resnet152": 400.0, "timm.resnet50": 500.0})
    results.jobs["mode_label"] = results.jobs["mode_label"].where(results.jobs["mode"] != "mps",
                                                                  "mps(partitions=4g+2g)")
    results.jobs.loc[results.jobs["mode"] == "mps", "slot_thread_percentage"] = [57.0, 28.0]
    shares = findings.shares_table(findings.shared_jobs(derive(results), "seed-37"))
    assert shares.to_dict("records") == [{"experiment": "seed-37", "cell": "R152 + R50 as 1+1",
                                          "sharing": "MPS partition (not MIG) 4g+2g",
                                          "asked -> had (share of the card)": "R152 57 % -> 75 %, R50 28 % -> 50 %"}]


# -- a real CPU run with one job starved ------------------------------------------------------------------------------

class Throttle(threading.Thread):
    """Holds one job of a run to `share` of the wall clock from its `ready` event until it ends: SIGSTOP and SIGCONT
    in turn, as cpulimit does (a job the scheduler starves). It finds the job by its event log under `out`."""

    def __init__(self, out: Path, run_pattern: str, job_prefix: str, share: float, period_s: float = 0.05):
        super().__init__(daemon=True)
        self.out, self.run_pattern, self.job_prefix = out, run_pattern, job_prefix
        self.share, self.period_s = share, period_s
        self.stop, self.pid = threading.Event(), None

    def _ready_pid(self) -> int | None:
        for log in self.out.glob(f"*/{self.run_pattern}/jobs/{self.job_prefix}*.events.jsonl"):
            for line in log.read_text().splitlines():
                event = json.loads(line)
                if event.get("type") == "ready":
                    return int(event["pid"])
        return None

    def run(self) -> None:
        while self.pid is None and not self.stop.wait(0.02):
            self.pid = self._ready_pid()
        try:
            while self.pid and not self.stop.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(self.period_s * (1 - self.share))
                os.kill(self.pid, signal.SIGCONT)
                time.sleep(self.period_s * self.share)
        except ProcessLookupError:  # the job ended
            pass
        finally:
            if self.pid:
                try:
                    os.kill(self.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass


@pytest.mark.slow
def test_a_starved_job_makes_its_run_unfair_and_is_named_as_the_one_that_lost(tmp_path):
    throttle = Throttle(tmp_path, "*naive-x2*", "j1-", share=0.1)
    throttle.start()
    try:
        colloc_kit.sweep([{**TINY, "seconds": 3}], ["naive"], copies=2, out=tmp_path, name="starved", monitor=False,
                         progress=False)
    finally:
        throttle.stop.set()
        throttle.join(5)
    assert throttle.pid, "the throttle found the job it starves"
    results = colloc_kit.load(tmp_path)  # as a reader gets it
    run = results.runs[results.runs["mode"] == "naive"].iloc[0]
    jobs = results.jobs[results.jobs["run_id"] == run["run_id"]].set_index("job")
    starved, fed = jobs.loc["j1-smallcnn", "relative_throughput"], jobs.loc["j0-smallcnn", "relative_throughput"]
    assert starved < 0.5 * fed, (starved, fed)  # held to 10 % of the clock
    assert run["least_served"] == "j1-smallcnn" and run["slowdown_max"] == jobs["epoch_time_growth"].max()
    assert run["fairness_index"] == pytest.approx(fairness.jain_index([fed, starved]))
    assert run["fairness_index"] < 0.9
    assert "repeats of one cell" not in str(analysis.noise(results.jobs))  # not noise: one job lost
    assert analysis.summarize(results).set_index("mode").loc["naive", "fairness_index_mean"] < 0.9
