"""Start jobs in their slots, hold them at a start barrier, release them together, and record what each one did.

Jobs that started together also stop together: a job whose budget is met (its `measured` event) trains on until
every job of the wave is measured or gone, then the launcher writes `stop` to each, so the jobs' measured windows
always lie inside one span in which all of them trained (the run's common window). That span ends with the first
training job's window, so the launcher then writes `close` to the other training jobs: each whose window is a time
(`seconds`) ends it at its next step, rather than measure seconds that no figure of the run counts (a count of steps
or epochs is kept whole; a server's window is its own).

Each job is a `python -m colloc_kit.worker` process in its own process group (forked from the experiment's zygote
where there is one, zygote.py, so that its imports are already done). Its stdout (the event stream) is
copied line by line to `jobs/<job>.events.jsonl`; its stderr to `jobs/<job>.stderr.log`. A job that crashes, runs
out of memory, overruns its time limit or is killed is recorded with its reason; the others run on. An interrupt
(Ctrl-C, or "interrupt kernel" in Jupyter) stops every job and re-raises after recording what was measured.

    >>> outcomes = Wave([LaunchItem("job0", job, slot)], jobs_dir=Path("runs/x/jobs")).run()   # doctest: +SKIP
    >>> outcomes[0].status                                                                     # doctest: +SKIP
    'complete'
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from colloc_kit import events, supervise
from colloc_kit.serving import SERVE
from colloc_kit.spec import JobSpec
from colloc_kit.pipeline import outcome
from colloc_kit.pipeline.launched import LaunchedJob, LaunchItem, pump_events, signal_job
from colloc_kit.statuses import INTERRUPTED, TIMED_OUT
from colloc_kit.store.manifest import JobOutcome
from colloc_kit.store.rundir import events_file, stderr_file
from colloc_kit.worker.zygote import ForkedWorker, Zygote

__all__ = ["LaunchItem", "Wave", "worker_command"]

READY_TIMEOUT_S = 900.0  # building a large model and loading its first batch; past this the job is failed
STOP_GRACE_S = 5.0
POLL_S = 0.02


def worker_command(item: LaunchItem) -> list[str]:
    """The argument list that starts one job's worker (also what a user can run by hand)."""
    return [sys.executable, "-m", "colloc_kit.worker", *item.spec.to_argv(),
            "--job-id", item.job_id, "--barrier", "stdin"]


class Wave:
    """Jobs that start together behind one barrier. `run()` fills `outcomes` (one per item, in order), also when
    an interrupt cuts it short, so the caller can record what was measured before the interrupt propagates.

    `on_event` sees every event as it arrives (progress display); `on_start` gets {pid: job_id} once all are
    started (the monitor uses it to attribute GPU memory to jobs). With a `zygote`, workers are forked from it;
    `placement` says how they sit on the host's cores (`supervise.host_shares`). With `keep`, jobs that complete
    their window stay alive, paused (training on, held) and primed (`kept`), for `again` (a warm repeat's next
    window, on a new feed where asked), until `close`.
    """

    def __init__(self, items: list[LaunchItem], jobs_dir: Path, time_limit_s: float | None = None,
                 on_event: Callable[[dict], None] | None = None,
                 on_start: Callable[[dict[int, str]], None] | None = None, zygote: Zygote | None = None,
                 placement: str = "pinned", keep: bool = False):
        self.items, self.jobs_dir, self.time_limit_s, self.placement = items, jobs_dir, time_limit_s, placement
        self.on_event, self.on_start, self.zygote, self.keep = on_event, on_start, zygote, keep
        self.released_at: float | None = None
        self.ended_at: float | None = None  # when its last window ended (every job's `end` in, or gone)
        self.held_before_s = 0.0  # a warm repeat's window (`again`): from the last window's end to its release
        self.oom_kills = supervise.oom_kills()  # the machine's count, to tell the OOM killer's SIGKILL from others'
        self.outcomes: list[JobOutcome] = []
        self.kept = False  # every job alive, paused after a complete window: `again` may run another
        self._jobs: list[LaunchedJob] = []

    def run(self) -> list[JobOutcome]:
        """Start every job, hold them at the barrier until all are ready, release them together, wait for
        all to end (the time limit stops the late ones) and return one JobOutcome per job, in order. Ctrl-C stops
        every job.
        """
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        jobs = self._jobs
        ended = False
        try:
            for item, cores in zip(self.items, supervise.host_shares(len(self.items), self.placement)):
                jobs.append(_start(item, self.jobs_dir, cores, self.on_event, self.zygote))
            if self.on_start:
                self.on_start(self.pids())
            _wait_until_ready(jobs, self.time_limit_s)
            self.released_at = _release(jobs)
            _wait_until_done(jobs, self.time_limit_s, pause=self.keep)
            ended = True
        except KeyboardInterrupt:
            _mark_interrupted(jobs)
            raise
        finally:
            self._settle(ended)
        return self.outcomes

    def again(self, jobs_dir: Path, feeds: list[JobSpec] | None = None) -> list[JobOutcome]:
        """A warm repeat: the kept jobs' next window, released together, its events into `jobs_dir` (another run's;
        their stderr stays in the first run's folder); one JobOutcome per job, as `run` returns them. With `feeds`
        (one spec per job), each job's feed is swapped to its spec's first (`feed {json}`) and waited for until it
        is ready on it: a job that fails its swap holds no one up, as at a launch's barrier (the window then fails,
        and the wave is not kept)."""
        assert self.kept, "again() needs the jobs kept after a complete window"
        jobs_dir.mkdir(parents=True, exist_ok=True)
        for job in self._jobs:
            job.events_path, job.last, job.stopped_as, job.note = events_file(jobs_dir, job.item.job_id), {}, None, None
        ended = False
        self.oom_kills = supervise.oom_kills()
        try:
            for job, spec in zip(self._jobs, feeds or []):
                job.ready.clear()
                _tell_all([job], f"{events.FEED} {json.dumps(job.item.spec.feed_changes(spec))}")
                job.item = replace(job.item, spec=spec)
            if feeds:
                _wait_until_ready(self._jobs, self.time_limit_s)
            self.released_at = events.now()
            self.held_before_s = self.released_at - (self.ended_at or self.released_at)
            _tell_all(self._jobs, events.GO)
            _wait_until_done(self._jobs, self.time_limit_s, pause=True)
            ended = True
        except KeyboardInterrupt:
            _mark_interrupted(self._jobs)
            raise
        finally:
            self._settle(ended)
        return self.outcomes

    def pids(self) -> dict[int, str]:
        """{pid: job id} of the wave's jobs."""
        return {job.proc.pid: job.item.job_id for job in self._jobs}

    def whole(self) -> bool:
        """Whether every job still runs (a kept one may fail as it trains on, held, between windows)."""
        return all(job.alive() for job in self._jobs)

    def close(self) -> None:
        """End kept jobs: their stdin closed (each leaves, exit 0), then whatever still runs is stopped."""
        for job in self._jobs:
            if job.proc.stdin and not job.proc.stdin.closed:
                job.proc.stdin.close()
        deadline = time.monotonic() + STOP_GRACE_S
        while any(job.alive() for job in self._jobs) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        _stop_all(self._jobs)
        self.kept = False

    def _settle(self, ended: bool) -> None:
        """After a window: the jobs kept where asked and each completed it alive, else stopped; outcomes noted."""
        self.ended_at = events.now()
        self.kept = self.keep and ended and all(job.alive() and events.END in job.last for job in self._jobs)
        if not self.kept:
            _stop_all(self._jobs)
        self.outcomes = [outcome.of_job(job.item.job_id, job.last, job.stopped_as, job.proc.returncode, job.proc.pid,
                                        self.released_at, job.note, self.oom_kills) for job in self._jobs]


def _mark_interrupted(jobs: list[LaunchedJob]) -> None:
    for job in jobs:
        if job.alive():
            job.stopped_as = INTERRUPTED


def _start(item: LaunchItem, jobs_dir: Path, cores: list[int] | None, on_event: Callable[[dict], None] | None,
           zygote: Zygote | None) -> LaunchedJob:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}  # MPS only where the slot says
    env = {**inherited, **supervise.thread_env(cores), **item.slot.env, "PYTHONUNBUFFERED": "1"}
    stderr = open(stderr_file(jobs_dir, item.job_id), "wb")
    try:
        proc: subprocess.Popen[bytes] | ForkedWorker | None = (
            zygote.spawn(worker_command(item), env, cores, os.getcwd(), stderr) if zygote else None)
        if proc is None:
            proc = subprocess.Popen(worker_command(item), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=stderr, env=env, start_new_session=True)
    finally:
        stderr.close()
    if cores is not None:  # early: its threads and loader workers inherit it (a forked one set it itself)
        try:
            os.sched_setaffinity(proc.pid, cores)
        except OSError:  # it already died: its outcome says why
            pass
    job = LaunchedJob(item, proc, events_file(jobs_dir, item.job_id))
    job.pump = threading.Thread(target=pump_events, args=(job, on_event), name=f"events-{item.job_id}", daemon=True)
    job.pump.start()
    return job


def _wait_until_ready(jobs: list[LaunchedJob], time_limit_s: float | None = None) -> None:
    """Wait for every job to be ready (or gone), READY_TIMEOUT_S at most; a job suspended (SIGSTOP) for longer than
    the time limit is not waited for (it makes no progress; the limit counts from the start, which it holds up)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    suspended_since: dict[int, float] = {}
    while not all(job.ready.is_set() or not job.alive() for job in jobs):
        now = time.monotonic()
        for job in jobs:
            if job.ready.is_set() or not supervise.suspended(job.proc.pid):
                suspended_since.pop(job.proc.pid, None)
            elif now - suspended_since.setdefault(job.proc.pid, now) > (time_limit_s or READY_TIMEOUT_S):
                _time_out(job)
                supervise.kill_tree(job.proc.pid)  # its group, or the process alone (stopped before it took one)
        if now > deadline:
            for job in jobs:
                if not job.ready.is_set():
                    _time_out(job)
                    signal_job(job, signal.SIGKILL)
            return
        time.sleep(POLL_S)


def _release(jobs: list[LaunchedJob]) -> float:
    """Open the barrier: one line to every waiting worker, back to back."""
    released_at = events.now()
    _tell_all([job for job in jobs if events.READY in job.last], events.GO)
    return released_at


def _tell_all(jobs: list[LaunchedJob], line: str) -> None:
    """Write one line of the stdin protocol (`events.GO`, `events.STOP`, a `feed` line) to every live job (one that
    just died is skipped)."""
    for job in jobs:
        if job.alive():
            assert job.proc.stdin is not None  # a pipe
            try:
                job.proc.stdin.write(f"{line}\n".encode())
                job.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass


def _wait_until_done(jobs: list[LaunchedJob], time_limit_s: float | None, pause: bool = False) -> None:
    """Wait for every job to end; once a training job has its measured window, tell the other training jobs to close
    theirs; once each live job has its measured window, tell them all to stop (`pause`: to pause, and wait until each
    reported its end)."""
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    told = closed = False
    training = [job for job in jobs if job.item.spec.role != SERVE]
    while any(job.alive() and not (pause and events.END in job.last) for job in jobs):
        if deadline is not None and time.monotonic() > deadline:
            for job in jobs:
                if job.alive():
                    _time_out(job)
            return
        if not closed and any(events.MEASURED in job.last for job in training):  # the common window is over
            _tell_all([job for job in training if events.MEASURED not in job.last], events.CLOSE)
            closed = True
        if not told and all(events.MEASURED in job.last or not job.alive() for job in jobs):
            _tell_all(jobs, events.PAUSE if pause else events.STOP)
            told = True
        time.sleep(POLL_S)


def _time_out(job: LaunchedJob) -> None:
    """Mark `job` as stopped at its time limit, noting a suspended process (SIGSTOP): why it made no progress."""
    job.stopped_as, job.note = TIMED_OUT, outcome.suspended_note(job.proc.pid)


def _stop_all(jobs: list[LaunchedJob]) -> None:
    """Stop what still runs (`supervise.stop_all`: SIGTERM, then SIGKILL after a grace period, loader processes in
    the group too) and close the pipes."""
    supervise.stop_all([job.proc for job in jobs], grace_s=STOP_GRACE_S)
    for job in jobs:
        if job.pump:
            job.pump.join(timeout=5)
        for pipe in (job.proc.stdin, job.proc.stdout):
            if pipe and not pipe.closed:
                try:
                    pipe.close()
                except BrokenPipeError:  # a line still buffered for a job that is gone: closed all the same
                    pass
