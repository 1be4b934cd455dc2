"""A job worker or the preloaded zygote stopped (SIGSTOP, state T) mid-run under `--time-limit`, on the CPU: the limit
holds whatever state they are in, the stopped process is named and ended, nothing is left (issue 53)."""

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from processes import KitWatch, ended, kit

import colloc_kit
from colloc_kit.pipeline.launcher import STOP_GRACE_S
from colloc_kit.store.rundir import MANIFEST, find_runs

FLAGS = ["--model", "smallcnn", "--device", "cpu", "--image-size", "16", "--warmup-steps", "2", "--batch-size", "8",
         "--synthetic-samples", "64", "--workers", "0", "--interval-s", "0.1", "--no-monitor", "--quiet"]


def below(proc: subprocess.Popen, marker: str) -> list[psutil.Process]:
    """The processes under `proc` whose command line holds `marker`."""
    found = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if marker in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def wait_for_starts(out: Path, proc: subprocess.Popen, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum('"start"' in p.read_text() for p in out.rglob("*.events.jsonl")) < n:
        assert time.monotonic() < deadline and proc.poll() is None, "the jobs never started"
        time.sleep(0.05)


def manifest_of(out: Path) -> dict:
    (run,) = find_runs(out)
    return json.loads((run.path / MANIFEST).read_text())


@pytest.mark.slow
def test_a_stopped_job_worker_is_killed_at_the_time_limit_and_named(tmp_path):
    """A worker SIGSTOPped mid-run makes no progress: the time limit still ends the cell on time (a stopped process
    acts on SIGTERM only once continued, so the grace period must not be spent waiting for it), the job is recorded
    as timed out saying its process was stopped, nothing is left, and the folder reads back."""
    limit = 6
    proc = kit("run", *FLAGS, "--seconds", "60", "--copies", "2", "--time-limit", limit, "--out", tmp_path)
    watch = KitWatch(proc.pid)
    wait_for_starts(tmp_path, proc, 2)
    (victim,) = below(proc, "--job-id j0")
    victim.suspend()
    code, _, _ = ended(proc, watch, timeout=limit + 60)
    assert code == 1
    jobs = {job["outcome"]["job_id"]: job for job in manifest_of(tmp_path)["jobs"]}
    stopped = jobs["j0-smallcnn"]["outcome"]
    assert stopped["status"] == "timed_out" and stopped["error_kind"] == "timeout"
    assert "stopped at its time limit" in stopped["error"]
    assert f"process {victim.pid} was suspended (SIGSTOP" in stopped["error"], stopped["error"]
    assert stopped["ended_at"] - stopped["released_at"] < limit + STOP_GRACE_S - 1  # no grace spent on it
    assert jobs["j1-smallcnn"]["outcome"]["status"] == "timed_out"  # held for the common window, then stopped
    results = colloc_kit.load(tmp_path)
    assert not results.broken and len(results.jobs) == 2


@pytest.mark.slow
def test_a_job_worker_stopped_before_it_is_ready_is_not_waited_for_past_the_time_limit(tmp_path, monkeypatch):
    """Suspended before its `ready`, a worker held every job at the start barrier for READY_TIMEOUT_S (15 minutes),
    whatever --time-limit said: now it is ended once suspended for longer than the limit, and says so. The workers
    start as fresh processes (no zygote), so that the one stopped is found within its seconds of imports: a forked
    one is ready within milliseconds of showing its name, sooner than this test can stop it (CI, session 27)."""
    monkeypatch.setenv("COLLOC_KIT_ZYGOTE", "0")
    limit = 5
    proc = kit("run", *FLAGS, "--steps", "3", "--copies", "2", "--time-limit", limit, "--out", tmp_path)
    watch = KitWatch(proc.pid)
    deadline = time.monotonic() + 60
    while not (workers := below(proc, "--job-id j0")):
        assert time.monotonic() < deadline and proc.poll() is None, "no worker started"
        time.sleep(0.005)
    workers[0].suspend()
    code, _, _ = ended(proc, watch, timeout=limit + 60)
    assert code == 1
    jobs = {job["outcome"]["job_id"]: job["outcome"] for job in manifest_of(tmp_path)["jobs"]}
    (events,) = tmp_path.rglob("j0-smallcnn.events.jsonl")
    assert '"ready"' not in events.read_text()  # it was stopped before it got ready
    assert jobs["j0-smallcnn"]["status"] == "timed_out"
    assert jobs["j0-smallcnn"]["error"].startswith("did not get ready in time; process ")
    assert "was suspended (SIGSTOP" in jobs["j0-smallcnn"]["error"]
    assert jobs["j1-smallcnn"]["status"] == "complete"  # released once the stopped one was given up


@pytest.mark.slow
def test_a_stopped_zygote_mid_run_neither_hangs_the_run_nor_loses_its_jobs(tmp_path):
    """The zygote SIGSTOPped once its workers run: it cannot reap them or say how they ended. The kit must not wait
    for it (it waited forever, even past --time-limit): the jobs that reported their end are complete, the zygote is
    killed and the run names what happened to it."""
    proc = kit("run", *FLAGS, "--seconds", "3", "--copies", "2", "--time-limit", "120", "--out", tmp_path)
    watch = KitWatch(proc.pid)
    wait_for_starts(tmp_path, proc, 2)
    (zygote,) = below(proc, "colloc_kit.worker.zygote")
    zygote.suspend()
    started = time.monotonic()
    code, _, err = ended(proc, watch, timeout=90)
    assert code == 0, err
    assert time.monotonic() - started < 60  # well before the time limit
    manifest = manifest_of(tmp_path)
    assert [job["outcome"]["status"] for job in manifest["jobs"]] == ["complete", "complete"]
    assert any(f"the zygote (pid {zygote.pid}) was suspended (SIGSTOP" in p for p in manifest["problems"]), \
        manifest["problems"]
    assert (colloc_kit.load(tmp_path).jobs["images_per_s"] > 0).all()


@pytest.mark.slow
def test_a_job_that_dies_while_its_zygote_is_stopped_keeps_its_exit_code(tmp_path):
    """A worker that dies (SIGKILL, the `crash` fault) while the zygote that forked it is suspended: the zygote never
    reaps it, so the kit reads how it ended from /proc before killing the zygote (it was `exited with code 255`)."""
    job = {"model": "smallcnn", "device": "cpu", "image_size": 16, "warmup_steps": 2, "batch_size": 8,
           "synthetic_samples": 64, "workers": 0}
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"jobs": [{**job, "seconds": 3}, {**job, "steps": 100000, "fail_at_step": 1000,
                                                                  "fail_kind": "crash"}], "monitor": False}))
    proc = kit("run", spec, "--quiet", "--time-limit", "120", "--out", tmp_path / "out")
    watch = KitWatch(proc.pid)
    deadline = time.monotonic() + 120
    while sum('"ready"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the jobs never got ready"
        time.sleep(0.005)
    (zygote,) = below(proc, "colloc_kit.worker.zygote")
    zygote.suspend()
    code, _, _ = ended(proc, watch, timeout=90)
    assert code == 1
    (crashed,) = (job["outcome"] for job in manifest_of(tmp_path / "out")["jobs"] if job["group"] == 1)
    assert "injecting fault crash at step 1000" in next(tmp_path.rglob("j1-*.stderr.log")).read_text()
    assert crashed["exit_code"] == -signal.SIGKILL and crashed["error"].startswith("worker killed by SIGKILL"), crashed


@pytest.mark.slow
def test_a_zygote_stopped_while_it_imports_does_not_hold_the_run(tmp_path):
    """Stopped before it says it is ready, the zygote was waited for up to 10 minutes: now the kit gives up on it at
    once, kills it and starts the workers as fresh processes, saying so."""
    proc = kit("run", *FLAGS, "--steps", "3", "--copies", "2", "--time-limit", "120", "--out", tmp_path)
    watch = KitWatch(proc.pid)
    deadline = time.monotonic() + 60
    while not (zygotes := below(proc, "colloc_kit.worker.zygote")):
        assert time.monotonic() < deadline and proc.poll() is None, "no zygote started"
        time.sleep(0.01)
    zygotes[0].suspend()
    code, _, err = ended(proc, watch, timeout=150)
    assert code == 0, err
    assert "workers start as fresh processes" in err and "was suspended (SIGSTOP" in err, err
    assert [job["outcome"]["status"] for job in manifest_of(tmp_path)["jobs"]] == ["complete", "complete"]
