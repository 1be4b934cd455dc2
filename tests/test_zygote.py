"""The zygote: workers forked from one preloaded process behave as `python -m colloc_kit.worker` processes do (events,
exit codes, process group, cores, threads, name), and no process outlives its kit or its zygote (real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from processes import survivors_of_killed_kit

import colloc_kit
from colloc_kit import events
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.spec import JobSpec
from colloc_kit.store import rundir
from colloc_kit.worker.zygote import EXIT_UNKNOWN, Zygote, enabled

TINY = ["--model", "smallcnn", "--device", "cpu", "--image-size", "16", "--batch-size", "8",
        "--synthetic-samples", "32", "--workers", "0"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "colloc_kit.worker", *TINY, *args]


def spawn(zygote: Zygote, tmp_path, *args: str, cores: list[int] | None = None):
    with open(tmp_path / "stderr.log", "wb") as stderr:
        proc = zygote.spawn(command(*args), {**os.environ, "OMP_NUM_THREADS": "1"},
                            cores or sorted(os.sched_getaffinity(0)), str(tmp_path), stderr)
    assert proc is not None, (tmp_path / "stderr.log").read_text()
    return proc


def read_events(proc) -> list[dict]:
    return [events.parse(line.decode()) for line in proc.stdout]


@pytest.fixture(scope="module")
def zygote():
    with Zygote() as z:
        yield z


@pytest.mark.slow
def test_a_forked_worker_trains_as_a_fresh_one_would(zygote, tmp_path):
    core = sorted(os.sched_getaffinity(0))[-1]
    proc = spawn(zygote, tmp_path, "--steps", "4", "--warmup-steps", "1", "--job-id", "forked", cores=[core])
    assert os.getpgid(proc.pid) == proc.pid  # its own process group: the launcher signals the group
    name = " ".join(psutil.Process(proc.pid).cmdline())
    assert "-m colloc_kit.worker" in name and "--job-id forked" in name
    evs = read_events(proc)
    assert proc.wait(timeout=60) == 0
    assert [e["type"] for e in evs][0] == events.READY and evs[-1]["type"] == events.END
    ready = evs[0]
    assert ready["job"] == "forked" and ready["cores"] == [core] and ready["threads"] == 1
    assert ready["pid"] == proc.pid and ready["imports_s"] < 1.0  # torch was imported before the fork


@pytest.mark.slow
def test_exit_codes_are_the_workers(zygote, tmp_path):
    bad = spawn(zygote, tmp_path, "--steps", "-3")
    assert [e["kind"] for e in read_events(bad)] == ["bad_input"]
    assert bad.wait(timeout=60) == 2
    crash = spawn(zygote, tmp_path, "--steps", "50", "--fail-at-step", "2", "--fail-kind", "crash")
    read_events(crash)
    assert crash.wait(timeout=60) == -signal.SIGKILL


def test_barrier_stop_and_eof_work_through_the_kits_pipes(zygote, tmp_path):
    proc = spawn(zygote, tmp_path, "--steps", "2", "--warmup-steps", "1", "--barrier", "stdin")
    assert events.parse(proc.stdout.readline().decode())["type"] == events.READY
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)  # held at the barrier
    proc.stdin.close()  # the kit went away: the worker leaves (exit 3)
    assert proc.wait(timeout=60) == 3


def test_a_killed_group_is_reported_as_killed(zygote, tmp_path):
    proc = spawn(zygote, tmp_path, "--steps", "100000", "--barrier", "stdin")
    assert events.parse(proc.stdout.readline().decode())["type"] == events.READY
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM


@pytest.mark.slow
def test_a_worker_outliving_its_zygote_is_seen_to_end(tmp_path):
    with Zygote() as zygote:
        proc = spawn(zygote, tmp_path, "--steps", "100000", "--barrier", "stdin")
        assert events.parse(proc.stdout.readline().decode())["type"] == events.READY
        os.kill(zygote._proc.pid, signal.SIGKILL)
        zygote._proc.wait()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)  # still alive: no exit code made up while it runs
        proc.stdin.close()
        assert proc.wait(timeout=60) == EXIT_UNKNOWN
        assert zygote.spawn(command("--steps", "1"), dict(os.environ), [0], str(tmp_path), sys.stderr) is None


@pytest.mark.slow
def test_the_zygote_leaves_with_a_sigkilled_kit(tmp_path):
    """The kit's end of the socket closes with the kit; the zygote then ends, and so does a worker at its barrier."""
    argv = command("--steps", "5", "--barrier", "stdin")
    script = ("import json, os, sys; from colloc_kit.worker.zygote import Zygote; z = Zygote(); "
              f"w = z.spawn({argv!r}, dict(os.environ), [0], '.', sys.stderr); "
              "w.stdout.readline(); print(json.dumps([z._proc.pid, w.pid]), flush=True); sys.stdin.read()")
    kit = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, cwd=tmp_path)
    pids = json.loads(kit.stdout.readline())
    alive = survivors_of_killed_kit(kit, [psutil.Process(pid) for pid in pids], timeout=20)
    assert not alive, f"{[p.pid for p in alive]} outlived the SIGKILLed kit (zygote, worker)"


def test_a_zygote_still_importing_dies_with_its_sigkilled_kit():
    """Not only once it serves and hears its socket's end: a zygote whose kit dies while it still imports torch ends
    too (a parent-death signal). It is stopped mid-import here, so that it is still importing when the kit dies,
    whatever the machine's speed."""
    script = ("import sys; from colloc_kit.worker.zygote import Zygote; z = Zygote(); print(z._proc.pid, flush=True); "
              "sys.stdin.read()")
    kit = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    zygote = psutil.Process(int(kit.stdout.readline()))
    deadline = time.monotonic() + 60
    while not any("libtorch" in m.path for m in zygote.memory_maps()):  # importing torch: past its own set-up
        assert time.monotonic() < deadline, "the zygote did not start importing torch"
        time.sleep(0.01)
    zygote.suspend()
    alive = survivors_of_killed_kit(kit, [zygote], timeout=20)
    kit.stdout.close()
    assert not alive, "the zygote outlived its SIGKILLed kit"


@pytest.mark.slow
def test_a_zygote_that_would_fork_threads_refuses():
    code = ("import threading, time; threading.Thread(target=time.sleep, args=(5,), daemon=True).start(); "
            "from colloc_kit.worker.zygote_process import _preload; print(_preload())")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "threads after the imports" in said


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv("COLLOC_KIT_ZYGOTE", "0")
    assert not enabled()
    assert Zygote.for_experiment([JobSpec(model="smallcnn", device="cpu")]).__enter__() is None


@pytest.mark.own_zygote
@pytest.mark.slow
def test_an_experiment_forks_its_workers_from_one_zygote(tmp_path):
    job = dict(model="smallcnn", device="cpu", image_size=16, steps=2, warmup_steps=1, synthetic_samples=32,
               batch_size=8, workers=0)
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # another test's zygote may be running
    results = colloc_kit.run([job], mode="naive", copies=2, repeats=2, out=tmp_path, monitor=False, progress=False)
    assert list(results.jobs["status"]) == ["complete"] * 4
    assert (results.jobs["imports_s"] < 1.0).all()  # every run's workers, the first's included, came imported
    assert (results.runs["host_cpu_s"] > 0).all()  # the forked workers' CPU time, which the zygote reaped, counts
    left = [p for p in psutil.Process().children(recursive=True)
            if p.pid not in before and "colloc_kit" in " ".join(p.cmdline())]
    assert not left, "the experiment left its zygote or a worker running"


@pytest.mark.gpu
def test_a_forked_worker_trains_on_the_gpu(zygote, tmp_path):
    """The zygote imported torch without initialising CUDA, so a forked worker can."""
    proc = spawn(zygote, tmp_path, "--steps", "3", "--warmup-steps", "1", "--device", "cuda")
    evs = read_events(proc)
    assert proc.wait(timeout=300) == 0, (tmp_path / "stderr.log").read_text()
    assert evs[-1]["type"] == events.END and evs[0]["device"] != "cpu"


def test_a_zygote_asked_for_nothing_is_not_waited_for():
    """Closed before any worker was asked for (e.g. the mode failed to start), the zygote is stopped mid-import."""
    zygote = Zygote()
    zygote.close()
    assert zygote._proc.returncode == -signal.SIGKILL


@pytest.mark.gpu
def test_the_driver_check_tells_loaded_from_initialised():
    """torch maps libcuda at import (harmless before a fork); only cuInit makes a fork unsafe, and only that counts."""
    probe = ("import torch\nfrom colloc_kit.worker.zygote_process import _cuda_initialised\n"
             "before = _cuda_initialised()\ntorch.cuda.init()\nprint(before, _cuda_initialised())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["False", "True"]


def forked_from(path: Path) -> set[int]:
    """The parents of every job under `path` (each job's ready event): the zygote they forked from, else the kit."""
    return {event["ppid"] for run in rundir.find_runs(path) for job in run.read_manifest().jobs
            for event in rundir.read_events(run.events_path(job.job)) if event["type"] == "ready"}


@pytest.mark.own_zygote
@pytest.mark.slow
def test_a_zygote_given_to_a_block_forks_its_runs_and_outlives_it_unless_zygotes_are_off(tmp_path, monkeypatch):
    """`shared_zygote(zygote)`: the runs of the block fork from the zygote given (as the test suite's runs share one a
    test process), which lives on after the block; with COLLOC_KIT_ZYGOTE=0 the block's runs use none."""
    job = dict(model="smallcnn", device="cpu", image_size=16, steps=2, warmup_steps=1, synthetic_samples=32,
               batch_size=8, workers=0)
    with Zygote([JobSpec(model="smallcnn", device="cpu")]) as zygote:
        with shared_zygote(zygote):
            colloc_kit.run([job], mode="naive", copies=2, out=tmp_path / "given", monitor=False, progress=False)
        assert forked_from(tmp_path / "given") == {zygote.pid} and zygote.lost is None and zygote.usable()
        monkeypatch.setenv("COLLOC_KIT_ZYGOTE", "0")
        with shared_zygote(zygote):
            colloc_kit.run([job], mode="naive", copies=2, out=tmp_path / "off", monitor=False, progress=False)
        assert zygote.pid not in forked_from(tmp_path / "off") and len(forked_from(tmp_path / "off")) == 1
