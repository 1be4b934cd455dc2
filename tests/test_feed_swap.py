"""Feed swaps (`ExperimentSpec.feed_swaps`, issue 50's pair kind 1): a kept launch serves a cell and then its GPU-only
twin, the feed replaced in the same worker processes (`feed {json}` on a held worker's stdin), on real CPU workers
(processes, loader workers, the stdin protocol) and fake CIFAR-10 files on disk."""

import dataclasses
import json
from collections import Counter
from pathlib import Path

import psutil
import pytest
from fake_datasets import write_cifar10
from processes import kit_processes_below_us
import test_warm_repeats as warm_repeats
from test_warm_repeats import TINY, cell_phases_module, ready_of, windows

from colloc_kit import events
from colloc_kit.cli.main import main
from colloc_kit.experiments import seed as study
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_simulator import SimulatedNvml
from colloc_kit.pipeline.api import run_spec
from colloc_kit.pipeline.cell import Placement
from colloc_kit.pipeline.cells import cells, warm_launches, warm_order
from colloc_kit.pipeline.executors.dispatcher import _LaneProcess, _next_for
from colloc_kit.pipeline.lane import Lane
from colloc_kit.pipeline.progress import Progress
from colloc_kit.spec import ExperimentSpec, JobSpec


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    return write_cifar10(tmp_path_factory.mktemp("cifar"), images_per_batch=16)


class Worker(warm_repeats.Worker):
    """A worker behind the stdin barrier on CIFAR-10 files with two loader workers, as the launcher talks to it."""

    def __init__(self, cifar):
        super().__init__(feed=("--warmup-steps", "2", "--batch-size", "8", "--dataset", "cifar10",
                               "--data-root", str(cifar), "--workers", "2"))

    def held(self):
        """Its first window measured and ended: held, its loader workers running; their pids."""
        self.until(events.READY)
        self.say(events.GO)
        self.until(events.MEASURED)
        self.say(events.PAUSE)
        self.until(events.END)
        loaders = psutil.Process(self.proc.pid).children(recursive=True)
        assert len(loaders) == 2, "two loader workers"
        return loaders


def gone(processes):
    """Whether each process has ended and been reaped (no zombie left behind)."""
    return not [p for p in processes if psutil.pid_exists(p.pid) and p.is_running()]


@pytest.mark.slow
def test_a_held_worker_swaps_its_feed_ends_its_loader_workers_and_warms_up_on_the_new_feed(cifar):
    """`feed {json}` while held: the old feed's loader processes end (reaped), a `ready` says the swap and the new
    data, the model (its 10-way head: synthetic labels drawn from the model's classes) and process kept; the next
    window runs the spec's warm-up again, on the new feed; EOF: exit 0."""
    worker = Worker(cifar)
    loaders = worker.held()
    worker.say(f'{events.FEED} {json.dumps({"dataset": "synthetic", "data_root": None, "image_size": 32})}')
    swap = worker.until(events.READY)
    ready = swap[-1]
    assert [e["type"] for e in swap] == [events.READY], "nothing else reported while held"
    assert ready["feed_swap"] and ready["warm_window"] == 1 and ready["pid"] == worker.proc.pid
    assert ready["dataset"] == "synthetic" and ready["num_classes"] == 10 and ready["image_size"] == 32
    assert ready["feed_s"] > 0 and ready["first_batch_s"] > 0 and ready["primed_s"] == 0
    assert gone(loaders) and psutil.Process(worker.proc.pid).children(recursive=True) == [], "no loader left"
    worker.say(events.GO)
    window = worker.until(events.MEASURED)
    assert window[0]["type"] == events.START and window[0]["warmup_steps"] == 2 and window[0]["held_steps"] > 0
    assert not [e for e in window if e["type"] == events.READY], "the swap's ready announced this window"
    assert [e for e in window if e["type"] == events.INTERVAL and e["warmup"]], "warm-up again, on the new feed"
    worker.say(events.PAUSE)
    worker.until(events.END)
    worker.proc.stdin.close()
    assert worker.proc.wait(timeout=30) == 0


@pytest.mark.slow
@pytest.mark.parametrize("asked, says", [({"image_size": 64}, "built for 10 classes at 32 px"),
                                         ({"model": "resnet18"}, "some of the fields workers, dataset"),
                                         ({"dataset": "imagenet64", "data_root": "/nonexistent"}, "imagenet64")])
def test_a_swap_the_model_was_not_built_for_is_refused_and_the_worker_leaves_with_its_loaders(cifar, asked, says):
    """Another image size (the model's shapes), a field beyond the feed, data that is not there: bad input, exit 2,
    its loader processes ended."""
    worker = Worker(cifar)
    loaders = worker.held()
    worker.say(f"{events.FEED} {json.dumps(asked)}")
    error = worker.until(events.ERROR)[-1]
    assert error["kind"] == "bad_input" and says in error["message"], error
    assert worker.proc.wait(timeout=30) == 2 and gone(loaders)
    worker.proc.stdin.close()


def swapping(cifar, **fields):
    """Two copies of a tiny job on CIFAR-10 files (two loader workers each), warm repeats with feed swaps, the
    GPU-only twins as baselines."""
    job = JobSpec(**{**TINY, "dataset": "cifar10", "data_root": str(cifar), "workers": 2})
    return ExperimentSpec(jobs=[job], copies=[2], repeats=2, warm_repeats=True, feed_swaps=True,
                          baselines=["gpu-only"], monitor=False, **fields)


def loaders_of(pids):
    return [child for pid in pids for child in psutil.Process(pid).children(recursive=True)]


@pytest.fixture
def lane(tmp_path):
    placement = Placement(gpu=0, gpu_uuid=None, gpu_name=None, hostname="here", machine_file=tmp_path / "m.json")

    def started(spec):
        return Lane(spec, placement, tmp_path, Progress(total_runs=1, enabled=False))
    return started


@pytest.mark.own_zygote
@pytest.mark.slow
def test_a_twin_measures_its_cells_launch_its_feed_swapped_the_old_loader_processes_ended(cifar, tmp_path, lane):
    """After the cell's last repeat, its GPU-only twin's first repeat takes the kept launch: the same worker
    processes, their loader workers ended (none left), a window that says which run's feed it replaced and warms up
    again; the twin's next repeat is a plain later window; a twin with no cell of its own launches afresh."""
    spec = swapping(cifar)
    order = warm_order(cells(spec))
    assert [c.label for c in order] == ["naive-x2-r0", "naive-x2-r1", "gpu-only-naive-x2-r0", "gpu-only-naive-x2-r1",
                                        "gpu-only-exclusive-x1-r0", "gpu-only-exclusive-x1-r1"]
    with lane(spec) as running:
        for cell in order[:2]:
            running.run(cell)
        workers = sorted(running.kept.launch.wave.pids())
        loaders = loaders_of(workers)
        assert len(loaders) == 4, "two loader workers per job, alive while held"
        running.run(order[2])
        assert sorted(running.kept.launch.wave.pids()) == workers, "the same launch"
        assert not [p for p in loaders if psutil.pid_exists(p.pid)] and loaders_of(workers) == []
        for cell in order[3:]:
            running.run(cell)
    found = windows(tmp_path / spec.name)
    study_r0, study_r1 = found["naive-x2-r0"][0], found["naive-x2-r1"][0]
    swapped, later = found["gpu-only-naive-x2-r0"], found["gpu-only-naive-x2-r1"]
    assert {m.status.value for m, _ in found.values()} == {"complete"}
    assert (swapped[0].warm.launch, swapped[0].warm.window, swapped[0].warm.feed_from) == (
        study_r0.run_id, 2, study_r1.run_id)
    assert swapped[0].warm.warmup_steps is None, "the jobs' specs' warm-up, on the new feed"
    assert (later[0].warm.window, later[0].warm.feed_from, later[0].warm.warmup_steps) == (3, None, 0)
    for stream in swapped[1].values():
        ready = ready_of(stream)
        assert ready["feed_swap"] and ready["pid"] in workers and ready["dataset"] == "synthetic"
        assert ready["num_classes"] == 10, "the model's head kept: synthetic labels of its classes"
        assert [e for e in stream if e["type"] == events.INTERVAL and e["warmup"]]
    assert all(entry.spec["dataset"] == "synthetic" for entry in swapped[0].jobs)
    assert found["gpu-only-exclusive-x1-r0"][0].warm.window == 0, "no cell to swap from: a launch of its own"
    assert Counter(row["launch"] for row in cell_phases_module().cell_phases(tmp_path / spec.name)) == {
        "warm, first": 2, "warm, later": 3, "warm, swapped": 1}
    assert kit_processes_below_us() == []


@pytest.mark.own_zygote
@pytest.mark.slow
def test_a_swap_that_fails_fails_its_window_and_closes_the_launch(cifar, tmp_path, lane):
    """A twin whose feed the model was not built for (another image size): each job refuses the swap (bad input), the
    window's run fails with that reason, its launch is closed (no process left) and the next cell starts afresh."""
    spec = swapping(cifar)
    order = warm_order(cells(spec))
    wrong = dataclasses.replace(order[2], jobs=tuple(job.with_(image_size=64) for job in order[2].jobs))
    with lane(spec) as running:
        running.run(order[0])
        workers = running.kept.launch.wave.pids()
        running.run(wrong)
        assert running.kept.launch is None and not [pid for pid in workers if psutil.pid_exists(pid)]
        running.run(order[3])
    found = windows(tmp_path / spec.name)
    failed, _ = found["gpu-only-naive-x2-r0"]
    assert failed.status.value == "failed_jobs" and failed.warm.feed_from == found["naive-x2-r0"][0].run_id
    assert {(j.outcome.error_kind, "built for 10 classes at 32 px" in j.outcome.error) for j in failed.jobs} == {
        ("bad_input", True)}
    assert found["gpu-only-naive-x2-r1"][0].warm.window == 0, "the next repeat: a launch of its own"
    assert kit_processes_below_us() == []


@pytest.mark.slow
def test_run_spec_runs_each_twin_on_its_cells_launch_under_an_id_of_its_own(cifar, tmp_path):
    """The whole path (`run_spec`, one lane): every cell complete, each swapped twin's id apart from one launched
    afresh (a warm spec without feed swaps), the cells of the spec's jobs shared."""
    spec = swapping(cifar)
    results = run_spec(spec, out=tmp_path, progress=False)
    assert len(results.runs) == 6 and set(results.runs["status"]) == {"complete"}
    feed_from = {m.cell_id: m.warm.feed_from for m, _ in windows(tmp_path / spec.name).values()}
    assert [cell_id.split("-r")[0] for cell_id, run in feed_from.items() if run] == ["gpu-only-naive-x2"]
    plain = {c.cell_id for c in cells(dataclasses.replace(spec, feed_swaps=False))}
    assert {c.cell_id for c in cells(spec) if c.feed_from} & plain == set(), "a swapped twin never passes as fresh"
    assert {c.cell_id for c in cells(spec) if not c.feed_from} <= plain
    assert kit_processes_below_us() == []


@pytest.mark.slow
def test_over_two_gpus_a_twin_swaps_on_the_lane_that_ran_its_cell(cifar, tmp_path):
    """Over two stand-in GPUs (lane processes, the simulated NVML) a lane that ran a repeat of a cell takes its twin
    next and swaps it on the launch it keeps (each lane may: the other lane, idle, took the cell's second repeat): a
    swapped window on the GPU and in the processes of the run it swapped from."""
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)):
        results = run_spec(swapping(cifar, gpus="all"), out=tmp_path, progress=False)
    assert set(results.runs["status"]) == {"complete"}
    found = {m.run_id: (m, jobs) for m, jobs in windows(tmp_path / "experiment").values()}
    swapped = [(m, jobs) for m, jobs in found.values() if m.warm.feed_from]
    assert swapped and {m.cell_id.split("-r")[0] for m, _ in swapped} == {"gpu-only-naive-x2"}
    for twin, twin_jobs in swapped:
        cell, cell_jobs = found[twin.warm.feed_from]
        assert twin.gpu == cell.gpu and {ready_of(s)["pid"] for s in twin_jobs.values()} == {
            ready_of(s)["pid"] for s in cell_jobs.values()}
    assert kit_processes_below_us() == []


def test_the_plan_of_seed_33_fp32_under_feed_swaps_counts_39_launches_fewer_of_87(capsys, monkeypatch, tmp_path):
    """The design's count through `--plan`: 261 cells, 87 series (launches under warm repeats), 39 of them twins of a
    cell of their own experiment (13 per workload); the count for any cells (`warm_launches`) without swaps."""
    monkeypatch.setattr(study, "gpu_list", lambda: ([], "no NVIDIA driver"))  # planned on the H100
    assert main(["run", "seed-33", "--amp", "off", "--repeats", "3", "--warm-repeats", "--feed-swaps", "--plan",
                 "--out", str(tmp_path)]) == 0
    assert "launches: 48 for 261 cells (warm repeats), 39 fewer by feed swaps" in capsys.readouterr().out
    seed = study.SeedSpec(33, amp="off", repeats=3, warm_repeats=True)
    every = {c.cell_id: c for s in study.experiments(seed, study.Card.planned("H100-80GB")) for c in cells(s)}
    assert warm_launches([c for c in every.values() if c.repeat < 3]) == 87
    alone = tmp_path / "swaps-alone.yaml"  # a copy of seed-33.yaml (warm repeats and feed swaps) without the first
    alone.write_text("seed: 33\nfeed_swaps: true\n")
    assert main(["run", str(alone), "--plan", "--out", str(tmp_path)]) == 2, "not without warm repeats"
    assert "give it with warm_repeats" in capsys.readouterr().err


def test_an_idle_lane_takes_its_cells_twin_after_its_repeats_and_no_lane_takes_another_lanes_twin():
    spec = swapping(Path("/d"))
    by_label = {c.label: c for c in cells(spec)}

    def lane(last):
        return _LaneProcess("GPU", None, None, None, None, last=last)  # type: ignore[arg-type]

    todo = [by_label[label] for label in ("gpu-only-exclusive-x1-r0", "gpu-only-naive-x2-r0", "gpu-only-naive-x2-r1")]
    a, b = lane(by_label["naive-x2-r1"]), lane(None)
    assert todo[_next_for(a, todo, [a, b])].label == "gpu-only-naive-x2-r0"
    assert todo[_next_for(b, todo, [a, b])].label == "gpu-only-exclusive-x1-r0", "naive x2's twin: lane a's"
    # only lane a's twins wait: lane b waits too (taking one, it measured it afresh, then the next as its warm window:
    # no swap at all, the flake of test_over_two_gpus_a_twin_swaps_on_the_lane_that_ran_its_cell)
    twins = todo[1:]
    assert _next_for(b, twins, [a, b]) is None and twins[_next_for(a, twins, [a, b])].label == "gpu-only-naive-x2-r0"


def test_lone_repeats_past_the_plan_continue_its_series_so_precision_never_starts_one_from_nothing():
    """Session 28 on two H200s: each workload's GPU-only twins of mps x1, 4g x1 and 7g x1, swapped in the planned
    repeats, came back afresh as repeats 3 and 4, a series of their own with no runs, so never precise enough: lone
    repeats of a series nothing reads. Past `repeats`, every cell (a lone one, or a collocated cell of the study's
    with its `cell_precision`) now continues a planned series."""
    seed = study.SeedSpec(33, amp="off", repeats=3, warm_repeats=True, feed_swaps=True)
    for spec in study.experiments(seed, study.Card.planned("H100-80GB")):
        planned = {c.series for c in cells(spec) if c.repeat < spec.repeats}
        extra = [c for c in cells(spec) if c.repeat >= spec.repeats]
        assert all(c.copies == 1 or (c.baseline is None and c.mode.name != "exclusive") for c in extra)
        assert {c.label for c in extra if c.series not in planned} == set(), spec.copies
    lone = next(s for s in study.experiments(seed, study.Card.planned("H100-80GB")) if s.copies == [1])
    assert sorted({c.label.rsplit("-r", 1)[0] for c in cells(lone) if c.repeat >= lone.repeats}) == [
        "exclusive-x1", "gpu-only-exclusive-x1"]
