"""Warm repeats (`ExperimentSpec.warm_repeats`, pipeline/warm.py): a cell's repeats measured as consecutive windows of
one launch of its jobs, on real CPU workers (processes, loaders, the stdin protocol), in this process and over
stand-in GPUs (the simulated NVML)."""

import contextlib
import importlib.util
import io
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from processes import kit_processes_below_us

import colloc_kit
from colloc_kit import events
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_simulator import SimulatedNvml
from colloc_kit.pipeline.cells import Cell, cells
from colloc_kit.pipeline.entry import RELEASE_KEPT
from colloc_kit.pipeline.executors.dispatcher import KEPT_IDLE_S, Dispatcher, LaneCell, _LaneProcess, _next_for
from colloc_kit.pipeline.executors.gpus import kept_lanes
from colloc_kit.pipeline.warm import Kept, Launch
from colloc_kit.spec import ExperimentSpec, JobSpec
from colloc_kit.store.rundir import find_runs, read_events

TINY = dict(model="smallcnn", device="cpu", batch_size=8, image_size=32, workers=1, warmup_steps=2, interval_s=0.1,
            synthetic_samples=64, steps=12)


def windows(path):
    """{run label: (manifest, {job: its events})} of every run under `path`."""
    found = {}
    for run in find_runs(path):
        manifest = run.read_manifest()
        found[run.path.name.split("-", 2)[2]] = (manifest, {e.job: read_events(run.events_path(e.job))
                                                             for e in manifest.jobs})
    return found


def cell_phases_module():
    """benchmarks/scaling/cell_phases.py, which reads an experiment's runs."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "scaling" / "cell_phases.py"
    spec = importlib.util.spec_from_file_location("cell_phases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ready_of(stream):
    return next(event for event in stream if event["type"] == events.READY)


class Worker:
    """A worker behind the stdin barrier, as the launcher talks to it: `say` a line, read its events `until` one."""

    def __init__(self, *flags, feed=("--image-size", "32", "--warmup-steps", "1", "--dataset", "synthetic")):
        command = [sys.executable, "-m", "colloc_kit.worker", "--model", "smallcnn", "--device", "cpu",
                   "--steps", "5", *feed, "--job-id", "w", "--barrier", "stdin", *flags]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def until(self, kind):
        seen = []
        for line in self.proc.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == kind:
                return seen
        raise AssertionError(f"the worker ended before a {kind} event: {seen}")

    def say(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


def warmup_intervals(stream):
    return [e for e in stream if e["type"] == events.INTERVAL and e["warmup"]]


@pytest.mark.slow
def test_a_paused_worker_trains_on_held_and_measures_another_window_without_warm_up_on_go_and_leaves_on_eof():
    """The stdin protocol: `pause` ends the window like `stop`, then the worker trains on, held, reporting nothing;
    `go` gives another window at once, announced by a `ready` (and a `start`) that says which window, that nothing was
    set up for it, no warm-up, and the training held before it; EOF: it leaves, exit 0."""
    worker = Worker()
    first = worker.until(events.READY)[-1]
    worker.say(events.GO)
    window0 = worker.until(events.MEASURED)
    worker.say(events.PAUSE)
    assert worker.until(events.END)[-1]["steps"] >= 6
    time.sleep(0.5)  # held between windows
    worker.say(events.GO)
    held = worker.until(events.READY)
    again, start = held[-1], worker.until(events.START)[-1]
    assert [e["type"] for e in held] == [events.READY], "nothing reported while held between windows"
    assert first["primed_s"] > 0 and "warm_window" not in first and first["warmup_steps"] == 1
    assert again["warm_window"] == 1 and again["primed_s"] == 0 and again["pid"] == first["pid"]
    for said in (again, start):
        assert said["warmup_steps"] == 0 and said["held_steps"] > 0 and said["held_before_s"] >= 0.5, said
    window1 = worker.until(events.MEASURED)
    assert warmup_intervals(window0) and not warmup_intervals(window1), "warm-up in the launch's first window only"
    assert window1[-1]["steps"] == 5, "the later window's budget with no warm-up steps before it"
    worker.say(events.PAUSE)
    worker.until(events.END)
    worker.proc.stdin.close()
    assert worker.proc.wait(timeout=30) == 0, "paused and then EOF: it leaves, its windows complete"


@pytest.mark.slow
def test_a_worker_told_to_stop_while_held_between_windows_leaves_at_once():
    worker = Worker()
    worker.until(events.READY)
    worker.say(events.GO)
    worker.until(events.MEASURED)
    worker.say(events.PAUSE)
    worker.until(events.END)
    time.sleep(0.2)
    t0 = time.monotonic()
    worker.say(events.STOP)
    assert worker.proc.wait(timeout=30) == 0 and time.monotonic() - t0 < 5, "stop while held: it leaves, exit 0"
    assert worker.proc.stdout.read() == "", "and reports nothing more"
    worker.proc.stdin.close()


@pytest.mark.slow
def test_a_worker_that_fails_while_held_between_windows_reports_its_error_and_exits():
    """Held training is training: a fault in it (here at step 60, after a 6-step window) is an `error` event after
    the window's `end`, and exit code 1, without the launcher saying anything."""
    worker = Worker("--fail-at-step", "60", "--fail-kind", "cuda_error", "--batch-size", "8")
    worker.until(events.READY)
    worker.say(events.GO)
    worker.until(events.MEASURED)
    worker.say(events.PAUSE)
    assert worker.until(events.END)[-1]["steps"] < 60
    error = worker.until(events.ERROR)[-1]
    assert error["kind"] == "cuda_error" and "step 60" in error["message"]
    assert worker.proc.wait(timeout=30) == 1
    worker.proc.stdin.close()


def test_a_kept_launch_whose_job_died_since_is_closed_not_taken():
    """A kept job may fail as it trains on between windows: its launch is not taken for the next repeat (which starts
    afresh) but closed; a whole one is taken."""

    class Jobs:
        def __init__(self, whole):
            self.whole, self.closed = lambda: whole, False

        def close(self):
            self.closed = True

    for whole in (True, False):
        launch = Launch("naive-x1-abc", None, contextlib.ExitStack(), Jobs(whole), [], "run0")
        kept = Kept()
        kept.keep(launch)
        assert (kept.take("naive-x1-abc") is launch) == whole and launch.wave.closed != whole
        assert kept.launch is None


@pytest.mark.slow
def test_a_cells_repeats_are_windows_of_one_launch_and_every_window_is_a_run_of_its_own(tmp_path):
    """Each cell's repeats run one after another on one launch: one set of worker processes (the pids), primed once
    (the later windows' `ready` says `warm_window` and no priming), each window a complete run of its own whose
    manifest names its launch and window; the cells are not the cold ones; nothing is left running after."""
    results = colloc_kit.run([TINY], mode="naive", copies=[1, 2], repeats=3, out=tmp_path, monitor=False,
                             progress=False, warm_repeats=True)
    assert len(results.runs) == 6 and set(results.runs["status"]) == {"complete"}
    found = windows(tmp_path)
    for copies in (1, 2):
        launch = [found[f"naive-x{copies}-r{repeat}"] for repeat in range(3)]
        first_run = launch[0][0].run_id
        assert [(m.warm.launch, m.warm.window) for m, _ in launch] == [(first_run, w) for w in range(3)]
        pids = [{job: ready_of(stream)["pid"] for job, stream in jobs.items()} for _, jobs in launch]
        assert pids[0] == pids[1] == pids[2] and len(pids[0]) == copies, "one launch's processes measured each"
        for window, (manifest, jobs) in enumerate(launch):
            warm = manifest.warm
            assert (warm.warmup_steps, warm.held_before_s is not None) == ((0, True) if window else (None, False))
            assert not window or warm.held_before_s > 0, "a later window: no warm-up, after held training"
            for stream in jobs.values():
                ready = ready_of(stream)
                assert ready.get("warm_window") == (window or None)
                assert (ready["primed_s"] > 0) == (window == 0), "primed once, in the launch's first window"
                assert [e["type"] for e in stream].count(events.MEASURED) == 1
                assert bool(warmup_intervals(stream)) == (window == 0), "warm-up in the launch's first window only"
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
               for _, jobs in found.values() for stream in jobs.values() for pid in [ready_of(stream)["pid"]])
    phases = cell_phases_module().cell_phases(find_runs(tmp_path)[0].path.parent)
    assert Counter((row["jobs"], row["launch"]) for row in phases) == {
        (1, "warm, first"): 1, (1, "warm, later"): 2, (2, "warm, first"): 1, (2, "warm, later"): 2}
    assert all(row["primed_s"] == 0 for row in phases if row["launch"] == "warm, later")
    cold = ExperimentSpec(jobs=[JobSpec(**TINY)], copies=[1, 2], repeats=3)
    warm = ExperimentSpec(jobs=[JobSpec(**TINY)], copies=[1, 2], repeats=3, warm_repeats=True)
    assert not {c.cell_id for c in cells(cold)} & {c.cell_id for c in cells(warm)}, "warm cells never pass as cold"
    assert kit_processes_below_us() == []


@pytest.mark.slow
def test_a_held_server_idles_between_windows_and_warms_up_again_in_each(tmp_path):
    """A serve job's repeats as windows of one launch: one process serves them all, primed once; while held it idles
    (no request arrives or is answered between one window's `end` and the next one's `start`, the GPU left to what
    runs meanwhile); each window warms up again and measures its own latencies."""
    serve = dict(model="smallcnn", role="serve", device="cpu", batch_size=1, image_size=32, concurrency=1,
                 max_batch=1, seconds=0.5, warmup_steps=5, interval_s=0.1)
    results = colloc_kit.run([serve], repeats=3, out=tmp_path, monitor=False, progress=False, warm_repeats=True)
    assert len(results.runs) == 3 and set(results.runs["status"]) == {"complete"}
    assert (results.jobs["latency_p50_ms"] > 0).all() and (results.jobs["requests_in_window"] >= 3).all()
    launch = [found for _, found in sorted(windows(tmp_path).items())]
    streams = [next(iter(jobs.values())) for _, jobs in launch]
    assert len({ready_of(stream)["pid"] for stream in streams}) == 1, "one server measured each window"
    assert [(m.warm.window, ready_of(s).get("warm_window")) for (m, _), s in zip(launch, streams)] == [
        (0, None), (1, 1), (2, 2)]
    assert [ready_of(stream)["primed_s"] > 0 for stream in streams] == [True, False, False], "primed once"
    for earlier, later in zip(streams, streams[1:]):
        start = next(e for e in later if e["type"] == events.START)
        assert start["warmup_steps"] == 5 and start["held_before_s"] > 0
        assert warmup_intervals(later), "a server that idled warms up again"
        answered = [done for e in earlier if e["type"] == events.INTERVAL for _, done in e["requests"]]
        arrived = [arrival for e in later if e["type"] == events.INTERVAL for arrival, _ in e["requests"]]
        ended = next(e for e in earlier if e["type"] == events.END)["t"]
        assert max(answered) <= ended < start["t"] <= min(arrived), "nothing served while held"
    assert kit_processes_below_us() == []


@pytest.mark.slow
def test_a_held_server_asked_to_swap_its_feed_says_ready_at_once_and_serves_its_next_window():
    """A feed swap asked of a launch that holds a server (the launcher then waits for every job's `ready`): the
    server has no feed to swap, so it answers at once, and `go` still gives its next window."""
    worker = Worker("--role", "serve", "--concurrency", "1", "--max-batch", "1")
    worker.until(events.READY)
    worker.say(events.GO)
    worker.until(events.MEASURED)
    worker.say(events.PAUSE)
    worker.until(events.END)
    worker.say(f'{events.FEED} {{"dataset": "synthetic"}}')
    answered = worker.until(events.READY)[-1]
    assert answered["feed_swap"] and answered["warm_window"] == 1 and answered["primed_s"] == 0
    worker.say(events.GO)
    assert worker.until(events.MEASURED)[-1]["steps"] >= 5, "its next window measured"
    worker.say(events.STOP)
    assert worker.proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_a_window_that_fails_ends_its_launch_and_the_next_repeat_starts_afresh(tmp_path):
    """A job that fails (here in every window, at its fourth step) leaves no launch to keep: each repeat is the first
    window of a launch of its own, recorded so, and no process is left behind."""
    failing = {**TINY, "fail_at_step": 4, "fail_kind": "cuda_error"}
    results = colloc_kit.run([failing], mode="naive", copies=2, repeats=2, out=tmp_path, monitor=False,
                             progress=False, warm_repeats=True)
    assert set(results.runs["status"]) == {"failed_jobs"}
    for label, (manifest, _) in windows(tmp_path).items():
        assert (manifest.warm.launch, manifest.warm.window) == (manifest.run_id, 0), label
    assert kit_processes_below_us() == []


@pytest.mark.slow
def test_over_several_gpus_each_lane_keeps_to_the_series_it_ran_and_releases_it_with_its_experiment(tmp_path):
    """Over two stand-in GPUs, a lane takes the next repeat of the series it ran last, so that repeats are windows of
    the launch its GPU keeps (a repeat an idle lane takes from another's series starts afresh: no lane idles); lanes
    kept for a next experiment (`kept_lanes`, as `run seed-NN` keeps them) hold no launch once their experiment is
    done, so its checks meet no job (nor MPS daemon) of the last; nothing is left after."""
    with nvml.use_backend(SimulatedNvml("H100-80GB", gpus=2)), kept_lanes():
        for name in ("first", "second"):
            results = colloc_kit.run([TINY], mode="naive", copies=[1, 2], repeats=3, out=tmp_path, name=name,
                                     monitor=False, progress=False, gpus="all", warm_repeats=True)
            assert set(results.runs["status"]) == {"complete"}
            found = windows(tmp_path / name)
            pids = {ready_of(stream)["pid"] for _, jobs in found.values() for stream in jobs.values()}
            assert not [pid for pid in pids if psutil.pid_exists(pid)
                        and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE], "no kept job outlives its experiment"
            runs = {m.run_id: m for m, _ in found.values()}
            later = [m for m in runs.values() if m.warm.window > 0]
            assert len(later) >= 2, "repeats ran as later windows of a launch"
            for m in later:
                first = runs[m.warm.launch]
                assert (first.gpu, first.warm.window, first.cell_id.replace(f"-r{first.repeat}-", "-")) == (
                    m.gpu, 0, m.cell_id.replace(f"-r{m.repeat}-", "-")), "a launch's windows: one GPU, one series"
    assert kit_processes_below_us() == []


def test_an_idle_lane_takes_the_next_repeat_of_its_series_else_one_no_other_lane_runs():
    spec = ExperimentSpec(jobs=[JobSpec(**TINY)], copies=[1, 2, 3], repeats=2, warm_repeats=True)
    by_label = {c.label: c for c in cells(spec)}

    def lane(last: Cell | None) -> _LaneProcess:
        return _LaneProcess("GPU", None, None, None, None, last=last)  # type: ignore[arg-type]

    todo = [by_label[label] for label in ("naive-x3-r1", "naive-x2-r1", "naive-x1-r0", "naive-x1-r1")]
    a, b = lane(by_label["naive-x2-r0"]), lane(by_label["naive-x3-r0"])
    assert todo[_next_for(a, todo, [a, b])].label == "naive-x2-r1"
    c = lane(None)
    assert todo[_next_for(c, todo, [a, b, c])].label == "naive-x1-r0", "x3 and x2 belong to the other lanes"


def test_an_idle_lane_with_no_cell_waiting_closes_the_launch_it_keeps_once_after_a_grace():
    """At the queue's end an idle lane keeps no launch for long: its jobs would train on, held, beside the other
    lanes' cells (their host CPU shared); it is told once, after KEPT_IDLE_S (a lone baseline's repeat may come)."""
    class Proc:
        stdin = io.BytesIO()

        def poll(self):
            return None

    cell = cells(ExperimentSpec(jobs=[JobSpec(**TINY)], warm_repeats=True))[0]
    dispatcher = Dispatcher([SimpleNamespace(gpu=0)], [None], None)  # type: ignore[arg-type]
    lane = _LaneProcess("GPU 0", None, Proc(), None, None, last=cell)  # type: ignore[arg-type]
    dispatcher.lanes = [lane]
    dispatcher.pump()
    assert Proc.stdin.getvalue() == b"" and lane.last is cell, "kept through the grace"
    lane.idle_since -= KEPT_IDLE_S
    dispatcher.pump()
    dispatcher.pump()
    assert [json.loads(line) for line in Proc.stdin.getvalue().splitlines()] == [{RELEASE_KEPT: True}]
    assert lane.last is None


def test_a_closed_dispatchers_handles_read_their_ends_without_telling_its_lanes_anything():
    """After `close` (every lane's input closed) the handles of ended cells give their statuses and tell no lane to
    close its kept launch, however long the lanes took to leave (CI, session 26: a 4-GPU run's results read after
    close wrote to a closed input: ValueError)."""
    class Proc:
        stdin = io.BytesIO()

        def poll(self):
            return 0

    cell = cells(ExperimentSpec(jobs=[JobSpec(**TINY)], warm_repeats=True))[0]
    dispatcher = Dispatcher([SimpleNamespace(gpu=0)], [None], None)  # type: ignore[arg-type]
    pump = threading.Thread(target=lambda: None)  # the lane's output heard to its end
    pump.start()
    lane = _LaneProcess("GPU 0", None, Proc(), None, pump, last=cell)  # type: ignore[arg-type]
    lane.idle_since -= 2 * KEPT_IDLE_S  # it left, slowly, with the launch it kept
    dispatcher.lanes, dispatcher.codes[cell.cell_id] = [lane], 0
    Proc.stdin.close()
    assert LaneCell(cell, dispatcher).result() == "complete"
