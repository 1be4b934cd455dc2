"""Lanes (a process per GPU for the whole experiment, its jobs forked from one zygote), the placement of jobs on the
host's cores, and windows that end once their throughput is precise: real CPU cells on stand-in GPUs (the simulated
NVML), any number of them."""

import os
import time

import pytest
from processes import kit_processes_below_us

import colloc_kit
from colloc_kit import supervise
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_simulator import SimulatedNvml
from colloc_kit.pipeline import report
from colloc_kit.pipeline.cells import cells
from colloc_kit.pipeline.executors.gpus import kept_lanes
from colloc_kit.spec import ExperimentSpec, JobSpec
from colloc_kit.store.rundir import find_runs, read_events

TINY = dict(model="smallcnn", device="cpu", batch_size=8, image_size=32, workers=0, warmup_steps=2, interval_s=0.1,
            synthetic_samples=64, steps=12)


def stand_in_gpus(n):
    """An NVML with `n` simulated H100s (nothing here runs on a GPU)."""
    return nvml.use_backend(SimulatedNvml("H100-80GB", gpus=n))


def runs_of(path):
    """(manifest, {job: its ready event}) of every run under `path`."""
    found = []
    for run in find_runs(path):
        manifest = run.read_manifest()
        ready = {e.job: next(ev for ev in read_events(run.events_path(e.job)) if ev["type"] == "ready")
                 for e in manifest.jobs}
        found.append((manifest, ready))
    return found


@pytest.mark.own_zygote
@pytest.mark.parametrize("n_gpus", [2, 4])
@pytest.mark.slow
def test_each_gpu_is_one_lane_whose_jobs_fork_from_one_zygote(tmp_path, n_gpus):
    """Every cell of a GPU runs in that GPU's one lane process, every job of the lane is forked from one preloaded
    process (not a fresh interpreter per cell), every GPU is used, and pinned lanes split the host's cores."""
    with stand_in_gpus(n_gpus):
        results = colloc_kit.run([TINY], mode=["naive", "exclusive"], copies=[1, 2], repeats=n_gpus // 2,
                                 out=tmp_path, monitor=False, progress=False, gpus="all")
    assert set(results.runs["status"]) == {"complete"}
    found = runs_of(tmp_path)
    assert {m.gpu for m, _ in found} == set(range(n_gpus)), "every GPU ran cells"
    lane_blocks = supervise.split_cores(supervise.host_cores(), n_gpus)
    for gpu in range(n_gpus):
        on_gpu = [(m, ready) for m, ready in found if m.gpu == gpu]
        assert len({m.runner_pid for m, _ in on_gpu}) == 1, f"GPU {gpu}'s cells ran in one lane process"
        parents = {event["ppid"] for _, ready in on_gpu for event in ready.values()}
        assert len(parents) == 1 and parents != {on_gpu[0][0].runner_pid}, "forked from the lane's zygote"
        assert all(event["imports_s"] < 0.5 for _, ready in on_gpu for event in ready.values()), "nothing imported"
        assert {tuple(m.host_cpu.cores) for m, _ in on_gpu} == {tuple(lane_blocks[gpu])}
        for m, _ in on_gpu:
            job_cores = [set(j.outcome.cores) for j in m.jobs]
            assert set().union(*job_cores) == set(lane_blocks[gpu]), "the lane's jobs use every core of its block"
    assert kit_processes_below_us() == [], "no lane or zygote is left"


@pytest.mark.slow
def test_pinned_and_unpinned_runs_are_two_cells_and_jobs_record_where_they_ran(tmp_path):
    pinned = ExperimentSpec(jobs=[JobSpec(**TINY)], copies=[2])
    unpinned = ExperimentSpec(jobs=[JobSpec(**TINY)], copies=[2], placement="unpinned")
    assert [c.cell_id for c in cells(pinned)] != [c.cell_id for c in cells(unpinned)]

    colloc_kit.run_spec(pinned, out=tmp_path, progress=False)
    colloc_kit.run_spec(unpinned, out=tmp_path, progress=False)  # not skipped as done: another cell
    by_placement = {m.placement: m for m, _ in runs_of(tmp_path)}
    assert set(by_placement) == {"pinned", "unpinned"}
    host = set(os.sched_getaffinity(0))
    blocks = [set(j.outcome.cores) for j in by_placement["pinned"].jobs]
    assert set().union(*blocks) == host and (len(host) < 2 or not blocks[0] & blocks[1])
    for manifest in by_placement.values():
        for job in manifest.jobs:
            assert job.outcome.cores_ran_on and set(job.outcome.cores_ran_on) <= set(job.outcome.cores)
    assert all(set(j.outcome.cores) == host for j in by_placement["unpinned"].jobs)
    assert sorted(colloc_kit.load(tmp_path).runs["placement"]) == ["pinned", "unpinned"]  # what the tables say


@pytest.mark.slow
def test_until_ci_ends_the_window_once_the_throughput_is_precise(tmp_path):
    """A loose target ends a 60-s window within seconds, recording the CI it reached; an unreachable one runs to the
    most seconds and records the CI it had; each job's manifest and the jobs table say why its window ended."""
    loose = {**TINY, "steps": None, "seconds": 60, "until_ci": 0.5, "min_seconds": 1}
    tight = {**TINY, "steps": None, "seconds": 1.5, "until_ci": 1e-9, "min_seconds": 1}
    for name, job in (("loose", loose), ("tight", tight)):
        colloc_kit.run([job], mode="naive", copies=[1], out=tmp_path, name=name, monitor=False, progress=False)
    windows = {}
    for manifest, _ in runs_of(tmp_path):
        (job,) = manifest.jobs
        measured = next(e for e in read_events(find_runs(tmp_path / manifest.experiment)[0].events_path(job.job))
                        if e["type"] == "measured")
        windows[manifest.experiment] = (measured["steady_s"], job.outcome.window_ci, job.outcome.window_ended_by)
    assert 1 <= windows["loose"][0] < 30 and windows["loose"][1] <= 0.5 and windows["loose"][2] == "precision"
    assert windows["tight"][0] >= 1.5 and windows["tight"][1] > 1e-9 and windows["tight"][2] == "seconds"
    tables = {name: colloc_kit.load(tmp_path / name).jobs["window_ended_by"].tolist() for name in ("loose", "tight")}
    assert tables == {"loose": ["precision"], "tight": ["seconds"]}


@pytest.mark.slow
def test_a_runs_other_jobs_end_their_windows_with_its_first(tmp_path):
    """The common window ends with the first job's window: told so (`close`), a neighbour given 60 s ends its own at
    its next step, says why, and the run's figure spans the first job's window; a lone job is never told."""
    # 30 steps: the two windows overlap by about 0.4 s here, so a neighbour slow to warm up on a busy machine still
    # reaches steady state before the first job's window ends (6 steps left 0.09 s, and CI once found none)
    short, long = {**TINY, "steps": 30}, {**TINY, "steps": None, "seconds": 60}
    started = time.monotonic()
    results = colloc_kit.run([short, long], mode="naive", copies=[1], out=tmp_path, monitor=False, progress=False)
    assert time.monotonic() - started < 30
    jobs = results.jobs.set_index("group")
    assert jobs["window_ended_by"].tolist() == ["steps", "common"] and (jobs["status"] == "complete").all()
    ((manifest, _),) = runs_of(tmp_path)
    ends = {job.group: next(e["t"] for e in read_events(find_runs(tmp_path)[0].events_path(job.job))
                            if e["type"] == "measured") for job in manifest.jobs}
    assert 0 <= ends[1] - ends[0] < 2.0  # at its next step after hearing it, not 60 s later
    run = results.runs.iloc[0]
    assert run["throughput_window"] == "overlap" and run["window_end"] == pytest.approx(ends[0], abs=0.05)


@pytest.mark.slow
def test_a_window_of_steps_says_so(tmp_path):
    """A budget of steps ends the window by its steps, and the manifest says so."""
    colloc_kit.run([TINY], mode="naive", copies=[1], out=tmp_path, name="steps", monitor=False, progress=False)
    ((manifest, _),) = runs_of(tmp_path)
    assert [job.outcome.window_ended_by for job in manifest.jobs] == ["steps"]


@pytest.mark.parametrize("job, message", [
    ({"until_ci": 0.02}, "until_ci ends a window of at most `seconds`"),
    ({"seconds": 3, "until_ci": 0.02}, "at least min_seconds"),
    ({"seconds": 10, "until_ci": 2}, "until_ci is a share of the throughput"),
])
def test_until_ci_without_a_sound_budget_is_refused(job, message):
    with pytest.raises(colloc_kit.BadInput, match=message):
        JobSpec(model="smallcnn", device="cpu", **job)


@pytest.mark.parametrize("quick", ["1", "0"])
@pytest.mark.slow
def test_a_lane_starts_its_next_cell_while_the_last_one_is_read_back(tmp_path, monkeypatch, quick):
    """Quick start (the default): a slow read-back of one cell (its figures, jobs.csv) does not hold the lane's next
    cell, which starts before that cell's jobs.csv is written; the worker's loader started before its model built. The
    old path (COLLOC_KIT_QUICK_START=0, the A/B of benchmarks/scaling/scaling.py) reads back first and builds first."""
    slow_report = report._report

    def slow(run, bar, label):
        time.sleep(2.0)
        return slow_report(run, bar, label)

    monkeypatch.setenv("COLLOC_KIT_QUICK_START", quick)
    monkeypatch.setattr(report, "_report", slow)
    results = colloc_kit.run([TINY], mode="naive", copies=[1], repeats=2, out=tmp_path, monitor=False,
                             progress=False)
    assert list(results.runs["status"]) == ["complete", "complete"], "both cells read back, in order"
    first, second = sorted(find_runs(tmp_path), key=lambda run: run.read_manifest().started_at)
    read_back_at = (first.path / "jobs.csv").stat().st_mtime
    assert (second.read_manifest().started_at < read_back_at) == (quick == "1")
    ready = next(e for e in read_events(second.events_path("j0-smallcnn")) if e["type"] == "ready")
    assert ready["quick_start"] == (quick == "1") and ready["first_batch_s"] >= 0 and ready["model_s"] >= 0


@pytest.mark.own_zygote
@pytest.mark.parametrize("n_gpus", [1, 2])
@pytest.mark.slow
def test_kept_lanes_run_several_experiments_through_one_lane_and_zygote_per_gpu(tmp_path, n_gpus):
    """Inside `kept_lanes`, a second experiment over the same GPUs hands its cells to the lane processes the first
    one left (one GPU: to this process's lane, with the zygote the first started): each GPU's cells of both ran in one
    lane process whose jobs forked from one zygote; none is left after."""
    with stand_in_gpus(n_gpus), kept_lanes():
        for name in ("first", "second"):
            colloc_kit.run([TINY], mode="naive", copies=[1, 2], out=tmp_path, name=name, monitor=False,
                           progress=False, gpus="all")
    found = runs_of(tmp_path)
    assert {m.experiment for m, _ in found} == {"first", "second"} and {m.status for m, _ in found} == {"complete"}
    for gpu in {m.gpu for m, _ in found}:
        on_gpu = [(m, ready) for m, ready in found if m.gpu == gpu]
        assert len({m.runner_pid for m, _ in on_gpu}) == 1, "one lane process ran both experiments' cells"
        assert len({e["ppid"] for _, ready in on_gpu for e in ready.values()}) == 1, "forked from one zygote"
    assert kit_processes_below_us() == [], "the lanes left with the block"
