"""The run directory: one folder per run, self-describing, readable even when the run was cut short.

    runs/<experiment>/<run_id>/
        manifest.json          spec, machine, versions, git commit, mode state, per-job outcomes, status
        jobs/<job>.events.jsonl  the worker's event stream, as it arrived
        jobs/<job>.stderr.log    the worker's stderr
        jobs.csv               one row per job (written at the end, derived from the events)
        monitor/               GPU and host time series (Parquet), when the monitor ran
        mode/                  the sharing mode's own files (e.g. MPS pipes and logs)

The manifest is written before the first job starts with status "running" and completed at the end with
"complete", "failed_jobs" or "interrupted"; a manifest still saying "running" belongs to a run that was killed.

    >>> run = RunDir.create("runs", experiment="demo", label="naive-x2-r0")     # doctest: +SKIP
    >>> run.write_manifest({"status": "running"})
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

FORMAT = "colloc-kit-run/1"
MANIFEST = "manifest.json"
RUNNING, COMPLETE, FAILED_JOBS, INTERRUPTED = "running", "complete", "failed_jobs", "interrupted"


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
        return json.loads((self.path / MANIFEST).read_text())

    def write_manifest(self, manifest: dict) -> None:
        """Write atomically (temp file + rename), so a reader never sees half a manifest."""
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps({"format": FORMAT, **manifest}, indent=2, default=str))
        os.replace(tmp, self.path / MANIFEST)

    def update_manifest(self, **changes: Any) -> dict:
        manifest = self.read_manifest()
        manifest.update(changes)
        self.write_manifest(manifest)
        return manifest


def read_events(path: Path) -> list[dict]:
    """The events of one job's log; a torn last line (a run killed mid-write) is skipped."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def find_runs(path: str | Path) -> list[RunDir]:
    """The run directory at `path`, or every run directory below it, sorted by path."""
    path = Path(path)
    if (path / MANIFEST).exists():
        return [RunDir(path)]
    return [RunDir(p.parent) for p in sorted(path.rglob(MANIFEST))]


def safe_name(name: str) -> str:
    """`name` as a file name: runs of other characters become one underscore."""
    return re.sub(r"[^A-Za-z0-9._+=-]+", "_", name).strip("_") or "run"
