"""The run directory: one folder per run, self-describing, readable even when the run was cut short.

    runs/<experiment>/<run_id>/
        manifest.json          spec, cell, host and GPU, mode state, per-job outcomes, status (manifest.py)
        jobs/<job>.events.jsonl  the worker's event stream, as it arrived
        jobs/<job>.stderr.log    the worker's stderr
        jobs.csv               one row per job (written at the end, derived from the events)
        monitor/               GPU and host time series (Parquet), when the monitor ran
        mode/                  the sharing mode's own files (e.g. MPS pipes and logs)

The manifest (a `manifest.Manifest`) is written before the first job starts with status "running" and completed at
the end with "complete", "failed_jobs", "interrupted" or "error"; a manifest still saying "running" belongs to a run
that was killed. The statuses and their meanings: colloc_kit.statuses.

    >>> import tempfile
    >>> from colloc_kit.manifest import Manifest, ModeRecord
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
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from . import events, manifest
from .errors import BadInput, BrokenRun
from .manifest import MANIFEST, Manifest
from .statuses import INTERRUPTED, RUNNING, Status

__all__ = ["RunDir", "check_out", "effective_status", "events_file", "find_runs", "read_events", "safe_name",
           "stderr_file"]


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
    lives (one on another host, a Slurm node, is taken as alive); a run whose process died reads as interrupted.

    >>> from colloc_kit.manifest import ModeRecord
    >>> effective_status(Manifest(mode=ModeRecord("naive"), jobs=[], runner_pid=None))
    <Status.INTERRUPTED: 'interrupted'>
    """
    if record.status == RUNNING and not _alive(record.runner_pid, record.machine.hostname):
        return INTERRUPTED
    return record.status


def _alive(pid: int | None, hostname: str | None) -> bool:
    if pid is None:
        return False
    if hostname and hostname != socket.gethostname():
        return True
    return psutil.pid_exists(pid)


def read_events(path: Path) -> list[dict]:
    """The events of one job's log; a torn last line (a run killed mid-write) and lines that are not events are
    skipped; BrokenRun when the log cannot be read at all (e.g. it is a folder)."""
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BrokenRun(f"the event log {path} cannot be read ({exc.strerror})") from None
    return [e for e in map(events.parse, text.splitlines()) if e is not None and events.readable(e)]


def check_out(out: str | Path) -> None:
    """Refuse (BadInput) a results folder that is a file or where nothing can be written, before anything starts."""
    path = Path(out).expanduser()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise BadInput(f"results folder (--out) {out}: {existing} is a file, not a folder; give a folder for the "
                       "results (it is created if absent)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"results folder (--out) {out}: cannot write in {existing} (no permission or a read-only "
                       "file system); give a folder you can write to")


def find_runs(path: str | Path) -> list[RunDir]:
    """The run directory at `path`, or every run directory below it, sorted by path."""
    path = Path(path)
    if (path / MANIFEST).exists():
        return [RunDir(path)]
    return [RunDir(p.parent) for p in sorted(path.rglob(MANIFEST))]


def safe_name(name: str) -> str:
    """`name` as a file name: runs of other characters become one underscore; never '..' (runs stay inside out)."""
    return re.sub(r"[^A-Za-z0-9._+=-]+", "_", name).strip("._") or "run"
