"""One job as the launcher holds it once started (`LaunchedJob`: what it runs, its process, its event log, the last
event of each type) and the thread that copies its worker's stdout into that log (`pump_events`).

    >>> from colloc_kit.modes import Slot
    >>> LaunchItem("j0-smallcnn", JobSpec(model="smallcnn"), Slot("naive", {})).job_id
    'j0-smallcnn'
"""

from __future__ import annotations

import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from colloc_kit import events, supervise
from colloc_kit.events import ErrorKind
from colloc_kit.modes import Slot
from colloc_kit.spec import JobSpec
from colloc_kit.worker.zygote import ForkedWorker

__all__ = ["LaunchItem", "LaunchedJob", "pump_events", "signal_job"]


@dataclass(frozen=True)
class LaunchItem:
    """One job to start: its id, what it trains, and the slot it lands in."""

    job_id: str
    spec: JobSpec
    slot: Slot


@dataclass
class LaunchedJob:
    """A started job (see the module)."""

    item: LaunchItem
    proc: subprocess.Popen[bytes] | ForkedWorker  # started with stdin and stdout pipes
    events_path: Path
    ready: threading.Event = field(default_factory=threading.Event)
    last: dict = field(default_factory=dict)  # last event of each type
    pump: threading.Thread | None = None
    stopped_as: str | None = None  # timed_out / interrupted, when the launcher stopped it
    note: str | None = None  # what the launcher saw of it as it stopped it (its process suspended)

    def alive(self) -> bool:
        """Whether its process still runs."""
        return self.proc.poll() is None


def pump_events(job: LaunchedJob, on_event: Callable[[dict], None] | None) -> None:
    """Copy a worker's stdout to its event log, keep the last event of each type, pass events on.

    The pipe is drained to its end whatever happens, so a worker never blocks on a full pipe: a log that cannot be
    written (a full disk, a folder gone) stops the job, whose error says where the kit could not write."""
    log, failed = None, False
    try:
        log, log_path = open(job.events_path, "a", encoding="utf-8"), job.events_path
    except OSError as exc:
        failed = True
        _stop_unwritable(job, exc)
    assert job.proc.stdout is not None  # a pipe
    for raw in job.proc.stdout:
        line = raw.decode("utf-8", "replace")
        event = events.parse(line)
        if event is None or failed:
            continue
        assert log is not None  # opened, as nothing failed
        try:
            if job.events_path != log_path:  # a warm repeat's next window: its own run's log
                log.close()
                log, log_path = open(job.events_path, "a", encoding="utf-8"), job.events_path
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
        except OSError as exc:
            failed = True
            _stop_unwritable(job, exc)
            continue
        job.last[event["type"]] = event
        if event["type"] in (events.READY, events.ERROR):
            job.ready.set()  # an error before ready must not hold the barrier
        if on_event:
            on_event(event)
    if log is not None:
        try:
            log.close()
        except OSError:
            pass  # the flush of a line already reported as unwritable
    job.ready.set()


def _stop_unwritable(job: LaunchedJob, exc: OSError) -> None:
    """Stop a job whose event log cannot be written, recording why as its error (the events before stay)."""
    job.last[events.ERROR] = {"type": events.ERROR, "job": job.item.job_id, "t": events.now(),
                              "kind": ErrorKind.OTHER.value,
                              "message": f"could not write {job.events_path}: {exc.strerror or exc}"}
    job.ready.set()
    signal_job(job, signal.SIGTERM)


def signal_job(job: LaunchedJob, sig: int) -> None:
    """Send `sig` to the job's process group (or the process alone, before it took one)."""
    supervise.signal_group(job.proc.pid, sig)
