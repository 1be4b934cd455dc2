"""The run directory: one folder per run, self-describing, readable even when the run was cut short.

    runs/<experiment>/<run_id>/
        manifest.json          spec, cell, host and GPU, mode state, per-job outcomes, status (manifest.py)
        jobs/<job>.events.jsonl  the worker's event stream, as it arrived
        jobs/<job>.stderr.log    the worker's stderr
        jobs.csv               one row per job (written at the end, derived from the events)
        monitor/               GPU and host time series (Parquet), when the monitor ran
        mode/                  the sharing mode's own files (e.g. MPS pipes and logs)

A reader gathers a run in one call, `read_streams`: a `RunStreams` holding its manifest (asked everything first), its
status as it stands, each job's events and outcome, the files that are gone, and the monitor's samples.

The manifest (a `manifest.Manifest`) is written before the first job starts with status "running" and completed at
the end with "complete", "failed_jobs", "interrupted" or "error"; a manifest still saying "running" belongs to a run
that was killed. The statuses and their meanings: colloc_kit.statuses.

    >>> import tempfile
    >>> from colloc_kit.store.manifest import Manifest, ModeRecord
    >>> run = RunDir.create(tempfile.mkdtemp(), experiment="demo", label="naive-x2-r0")
    >>> run.write_manifest(Manifest(run_id=run.run_id, mode=ModeRecord("naive"), jobs=[]))
    >>> run.update_manifest(status="complete").status
    <Status.COMPLETE: 'complete'>
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import psutil

from colloc_kit import events
from colloc_kit.errors import BrokenRun
from colloc_kit.monitor import Samples, read_samples
from colloc_kit.statuses import COMPLETE, INTERRUPTED, RUNNING, Status
from colloc_kit.store import manifest
from colloc_kit.store.manifest import MANIFEST, JobEntry, JobOutcome, Manifest

__all__ = ["RunDir", "RunStreams", "effective_status", "events_file", "find_runs", "process_alive", "read_events",
           "read_streams", "runner_alive", "safe_name", "stderr_file", "this_runner"]

START_TIME_SLACK_S = 2.0  # the OS's start time of one process, read twice, differs by well under this


def events_file(jobs_dir: Path, job_id: str) -> Path:
    """Where a job's event stream is kept: `jobs/<job>.events.jsonl`."""
    return jobs_dir / f"{job_id}.events.jsonl"


def stderr_file(jobs_dir: Path, job_id: str) -> Path:
    """Where a job's stderr is kept: `jobs/<job>.stderr.log`."""
    return jobs_dir / f"{job_id}.stderr.log"


class RunDir:
    """Paths and manifest of one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def create(cls, out: str | Path, experiment: str, label: str) -> "RunDir":
        """A new, uniquely named run directory under out/<experiment>/."""
        parent = Path(out) / safe_name(experiment)
        parent.mkdir(parents=True, exist_ok=True)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{safe_name(label)}"
        for n in range(1000):
            path = parent / (stem if n == 0 else f"{stem}-{n}")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise FileExistsError(f"could not make a fresh run directory under {parent}")

    @property
    def run_id(self) -> str:
        """The run's id: its folder's name (`<time>-<cell label>`)."""
        return self.path.name

    @property
    def jobs_dir(self) -> Path:
        """`jobs/`: each job's event stream and stderr."""
        return self.path / "jobs"

    @property
    def monitor_dir(self) -> Path:
        """`monitor/`: the GPU and host time series (Parquet)."""
        return self.path / "monitor"

    @property
    def mode_dir(self) -> Path:
        """`mode/`: the sharing mode's own files (e.g. MPS pipes and logs)."""
        return self.path / "mode"

    def events_path(self, job_id: str) -> Path:
        """Where job `job_id`'s event stream is kept."""
        return events_file(self.jobs_dir, job_id)

    def read_manifest(self) -> Manifest:
        """The run's manifest (`manifest.read`); BrokenRun saying what is wrong when it cannot be read."""
        return manifest.read(self.path / MANIFEST)

    def write_manifest(self, record: Manifest) -> None:
        """Store the run's manifest (`manifest.write`: atomic, and kept whole on a full disk)."""
        manifest.write(self.path / MANIFEST, record)

    def update_manifest(self, **changes: Any) -> Manifest:
        """Read the manifest, change the given fields (`dataclasses.replace`), write it back; returns it."""
        record = replace(self.read_manifest(), **changes)
        self.write_manifest(record)
        return record


def effective_status(record: Manifest) -> Status:
    """A run's status as it stands: its manifest's, except that "running" holds only while the process that runs it
    lives (`runner_alive`); a run whose process died reads as interrupted (and its cell runs again).

    >>> from colloc_kit.store.manifest import ModeRecord
    >>> effective_status(Manifest(mode=ModeRecord("naive"), jobs=[], runner_pid=None))
    <Status.INTERRUPTED: 'interrupted'>
    """
    if record.status == RUNNING and not runner_alive(record):
        return INTERRUPTED
    return record.status


def this_runner() -> tuple[int, float]:
    """This process as a run's runner: its pid and its start time (Unix seconds, as the OS records it), the two
    that `runner_alive` later checks together (a pid alone is reused once the process is gone)."""
    return os.getpid(), psutil.Process().create_time()


def runner_alive(record: Manifest) -> bool:
    """Whether the process that wrote `record` still runs it: its pid lives and started when the runner did
    (`runner_started_at`; for a manifest of an older kit: before the run started), so a later process that reused
    the pid does not count. A runner on another host (a Slurm node) is taken as alive.

    >>> from colloc_kit.store.manifest import ModeRecord
    >>> pid, started = this_runner()
    >>> runner_alive(Manifest(mode=ModeRecord("naive"), jobs=[], runner_pid=pid, runner_started_at=started))
    True
    >>> runner_alive(Manifest(mode=ModeRecord("naive"), jobs=[], runner_pid=pid, runner_started_at=started - 60))
    False
    """
    return process_alive(record.runner_pid, record.runner_started_at, record.machine.hostname, record.started_at)


def process_alive(pid: Any, started_at: Any, host: str | None = None, began_by: Any = None) -> bool:
    """Whether process `pid`, started at `started_at` (`this_runner`'s time) on `host`, still lives: the pid lives
    and started then (without `started_at`: no later than `began_by`), so a reused pid does not count; a process on
    another host is taken as alive.

    >>> process_alive(*this_runner()), process_alive(this_runner()[0], this_runner()[1] - 60)
    (True, False)
    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if host and host != socket.gethostname():
        return True
    try:
        process = psutil.Process(pid)
        created, zombie = process.create_time(), process.status() == psutil.STATUS_ZOMBIE
    except (psutil.Error, OverflowError):  # gone (or a pid no process can have)
        return False
    if zombie:
        return False
    if isinstance(started_at, (int, float)):
        return abs(created - started_at) <= START_TIME_SLACK_S
    return not isinstance(began_by, (int, float)) or created <= began_by + START_TIME_SLACK_S


def read_events(path: Path) -> list[dict]:
    """The events of one job's log; a torn last line (a run killed mid-write) and lines that are not events are
    skipped; BrokenRun when the log cannot be read at all (e.g. it is a folder)."""
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BrokenRun(f"the event log {path} cannot be read ({exc.strerror})", path=path) from None
    return [e for e in map(events.parse, text.splitlines()) if e is not None and events.readable(e)]


@dataclass(frozen=True)
class RunStreams:
    """One run as a reader needs it, gathered in one call (`read_streams`): its folder and id, its manifest, its
    status as it stands (`effective_status`), whether it was a baseline (`Manifest.is_alone`), each job's events (in
    the manifest's order) and outcome (the manifest's, else `events.job_outcome`'s from its events: an
    `events.Outcome`), the finished jobs' event logs that are gone (`lost`), and the monitor's samples."""

    run: RunDir
    run_id: str
    manifest: Manifest
    status: Status
    alone: bool
    streams: Mapping[str, list[dict]]
    outcomes: Mapping[str, JobOutcome | events.Outcome]
    lost: tuple[str, ...]
    samples: Samples


def read_streams(run: RunDir) -> RunStreams:
    """Everything a reader needs of `run`, read once: the manifest (and all it is asked), then each job's event log
    and the outcome of a job the manifest has none for, then the monitor's samples (`monitor.read_samples`)."""
    record = run.read_manifest()
    alone, status = record.is_alone, effective_status(record)
    streams = {entry.job: read_events(run.events_path(entry.job)) for entry in record.jobs}
    outcomes = {entry.job: entry.outcome or _outcome_from_events(streams[entry.job], status == RUNNING)
                for entry in record.jobs}
    lost = tuple(f"{run.events_path(entry.job).name} is missing: {entry.job}'s figures cannot be computed"
                 for entry in record.jobs if _finished(entry, status) and not run.events_path(entry.job).exists())
    return RunStreams(run, run.run_id, record, status, alone, streams, outcomes, lost, read_samples(run.path))


def _outcome_from_events(stream: list[dict], run_live: bool = False) -> events.Outcome:
    """A job's outcome from its last events (`events.job_outcome`, unwatched), for a manifest that has none (a run
    killed before it ended, or one still under way: `run_live`, where a job that has not ended is running)."""
    last = {e["type"]: e for e in stream}
    if run_live and events.END not in last and events.ERROR not in last:
        return events.Outcome(RUNNING)
    return events.job_outcome(last, watched=False)


def _finished(entry: JobEntry, run_status: Status) -> bool:
    """Whether a job ended complete, by its manifest (its outcome, else its run's status): its event log must be
    there."""
    return (entry.outcome.status if entry.outcome else run_status) == COMPLETE


def find_runs(path: str | Path) -> list[RunDir]:
    """The run directory at `path`, or every run directory below it, sorted by path. The folders are walked with a
    list, not by recursion (a folder thousands of levels deep is walked too); a folder seen before through a link is
    not walked again, and one that cannot be listed is passed over."""
    path = Path(path)
    found, todo, seen = [], [path], set()
    while todo:
        folder = todo.pop()
        try:
            if (folder / MANIFEST).exists():
                found.append(RunDir(folder))
                continue
            stat = folder.stat()
            key = (stat.st_dev, stat.st_ino)
            if key in seen:
                continue
            seen.add(key)
            with os.scandir(folder) as entries:
                todo += [Path(e.path) for e in entries if e.is_dir()]
        except OSError:
            continue
    return sorted(found, key=lambda run: run.path)


def safe_name(name: str) -> str:
    """`name` as a file name: runs of other characters become one underscore; never '..' (runs stay inside out)."""
    return re.sub(r"[^A-Za-z0-9._+=-]+", "_", name).strip("._") or "run"
