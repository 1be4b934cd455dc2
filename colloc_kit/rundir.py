"""The run directory: one folder per run, self-describing, readable even when the run was cut short.

    runs/<experiment>/<run_id>/
        manifest.json          spec, machine, versions, git commit, mode state, per-job outcomes, status
        jobs/<job>.events.jsonl  the worker's event stream, as it arrived
        jobs/<job>.stderr.log    the worker's stderr
        jobs.csv               one row per job (written at the end, derived from the events)
        monitor/               GPU and host time series (Parquet), when the monitor ran
        mode/                  the sharing mode's own files (e.g. MPS pipes and logs)

The manifest is written before the first job starts with status "running" and completed at the end with
"complete", "failed_jobs", "interrupted" or "error"; a manifest still saying "running" belongs to a run that was
killed. The statuses and their meanings: colloc_kit.statuses.

    >>> run = RunDir.create("runs", experiment="demo", label="naive-x2-r0")     # doctest: +SKIP
    >>> run.write_manifest({"status": "running"})                               # doctest: +SKIP
"""

from __future__ import annotations

import errno
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from . import events
from .errors import BadInput, BrokenRun
from .statuses import JOB_STATUSES, RUN_STATUSES, RUNNING

FORMAT = "colloc-kit-run/1"
MANIFEST = "manifest.json"
JOB_SPEC_KEYS = ("model", "dataset", "batch_size", "amp", "device")  # what a reader needs of each job's spec


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
        return self.path.name

    @property
    def jobs_dir(self) -> Path:
        return self.path / "jobs"

    @property
    def monitor_dir(self) -> Path:
        return self.path / "monitor"

    @property
    def mode_dir(self) -> Path:
        return self.path / "mode"

    def events_path(self, job_id: str) -> Path:
        return events_file(self.jobs_dir, job_id)

    def read_manifest(self) -> dict:
        """The manifest; BrokenRun saying what is wrong when it is unreadable, not JSON or not a run's manifest."""
        path = self.path / MANIFEST
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8, not JSON (a torn write, a foreign file)
            raise BrokenRun(f"{path} cannot be read as JSON ({getattr(exc, 'strerror', None) or exc})") from None
        problem = manifest_problem(manifest)
        if problem:
            raise BrokenRun(f"{path} is not a colloc-kit run manifest: {problem}")
        return manifest

    def write_manifest(self, manifest: dict) -> None:
        """Write atomically (temp file + rename), so a reader never sees half a manifest; a failed write leaves the
        previous manifest and no temp file. On a full disk the manifest is rewritten compactly in the space it
        already has, where it fits, so that a run still records how it ended; else the error names the manifest."""
        path, tmp = self.path / MANIFEST, self.path / (MANIFEST + ".tmp")
        data = {"format": FORMAT, **manifest}
        try:
            tmp.write_text(json.dumps(data, indent=2, default=str))
            os.replace(tmp, path)
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            if not isinstance(exc, OSError):
                raise
            if exc.errno == errno.ENOSPC and _overwrite_within(path, json.dumps(data, default=str).encode()):
                return
            raise OSError(exc.errno, exc.strerror, str(path)) from exc  # a failed flush does not say which file

    def update_manifest(self, **changes: Any) -> dict:
        manifest = self.read_manifest()
        manifest.update(changes)
        self.write_manifest(manifest)
        return manifest


def _overwrite_within(path: Path, data: bytes) -> bool:
    """Overwrite a file with data that fits in the disk blocks it already holds; False where it does not fit (or
    the file cannot be opened)."""
    try:
        held = path.stat()
        if len(data) > max(held.st_size, held.st_blocks * 512):
            return False
        with open(path, "r+b") as file:
            file.write(data)
            file.truncate()
        return True
    except OSError:
        return False


def manifest_problem(manifest: Any) -> str | None:
    """What makes `manifest` unreadable as a run's manifest (the keys a reader relies on), or None."""
    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, not an object"
    mode, jobs = manifest.get("mode"), manifest.get("jobs")
    if not (isinstance(mode, dict) and isinstance(mode.get("name"), str)):
        return "no mode name (mode.name)"
    if manifest.get("status", RUNNING) not in RUN_STATUSES:
        return f"unknown run status {str(manifest.get('status'))[:40]!r}"
    if not isinstance(jobs, list):
        return "no job list (jobs)"
    for i, entry in enumerate(jobs):
        if not (isinstance(entry, dict) and isinstance(entry.get("job"), str) and entry["job"].strip(".")
                and "/" not in entry["job"] and isinstance(entry.get("spec"), dict)
                and all(k in entry["spec"] for k in JOB_SPEC_KEYS)):
            return f"jobs[{i}] lacks a job id or its spec ({', '.join(JOB_SPEC_KEYS)})"
        outcome, slot = entry.get("outcome"), entry.get("slot")
        if outcome is not None and not (isinstance(outcome, dict) and outcome.get("status") in JOB_STATUSES):
            return f"jobs[{i}] has an outcome without a known status"
        if slot is not None and not isinstance(slot, dict):
            return f"jobs[{i}] has a slot that is not an object"
    return None


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
