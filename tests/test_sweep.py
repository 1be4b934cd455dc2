"""`colloc_kit.sweep`: the notebooks' baseline-and-modes pattern in one call (real runs of tiny CPU jobs)."""

import pytest

import colloc_kit
from colloc_kit.analysis import summaries as analysis
from colloc_kit.store.rundir import find_runs, read_events

pytestmark = pytest.mark.slow  # real runs: 10-50 s each on 2 cores

TINY = dict(model="smallcnn", device="cpu", batch_size=8, image_size=32, workers=0, warmup_steps=2, interval_s=0.1,
            synthetic_samples=64, steps=12)


@pytest.mark.own_zygote
def test_each_group_gets_its_own_baseline_then_every_mode_at_its_copies(tmp_path):
    results = colloc_kit.sweep([TINY, {**TINY, "batch_size": 4}], ["naive", ("naive", [3])], copies=[2],
                               out=tmp_path, name="sweep", monitor=False, progress=False)
    assert sorted(zip(results.runs["mode"], results.runs["copies"])) == sorted(
        [("exclusive", 1), ("naive", 2), ("naive", 3)] * 2)
    assert set(results.jobs["status"]) == {"complete"} and len(results.runs) == 6
    summary = analysis.summarize(results)
    shared = summary[summary["mode"] == "naive"]
    assert len(shared) == 4 and shared["normalized_throughput_mean"].notna().all()  # every group found its baseline
    ready = [event for run in find_runs(tmp_path) for job in run.read_manifest().jobs
             for event in read_events(run.events_path(job.job)) if event["type"] == "ready"]
    assert len(ready) == 12 and len({event["ppid"] for event in ready}) == 1, "every job forked from one zygote"


def test_together_runs_the_groups_as_one_mixed_workload_and_no_baseline_when_asked(tmp_path):
    results = colloc_kit.sweep([TINY, {**TINY, "batch_size": 4}], ["naive"], baseline=None, separately=False,
                               out=tmp_path, name="mixed", monitor=False, progress=False)
    assert list(results.runs["mode"]) == ["naive"] and list(results.runs["copies"]) == [1]
    assert len(results.jobs) == 2
