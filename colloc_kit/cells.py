"""The cells of an experiment and what its folder holds of each: the unit that is run, skipped, dispatched, resumed.

A cell is one (mode, copies, repeat) of a spec, in the order `ExperimentSpec.runs()` gives (repeats interleaved,
A B A B). Its id is stable: the mode's label, the copies, the repeat and a fingerprint of the jobs, so the same
command into the same folder finds the cells it already ran, and a changed job (steps, batch size) makes new ones.

    >>> from colloc_kit.spec import JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=20)], copies=[1, 2])
    >>> [c.cell_id for c in cells(spec)]                                    # doctest: +ELLIPSIS
    ['naive-x1-r0-...', 'naive-x2-r0-...']
    >>> states = cell_states("runs/experiment")                              # doctest: +SKIP
    >>> states["naive-x1-r0-3f9a..."].status                                 # doctest: +SKIP
    'complete'
    >>> experiment_status("runs/experiment")[0]["status"]                    # doctest: +SKIP
    'done'
"""

from __future__ import annotations

import hashlib
import json
import socket
from dataclasses import dataclass
from pathlib import Path

import psutil

from .errors import BrokenRun
from .manifest import Manifest
from .rundir import RunDir, find_runs, safe_name
from .spec import ExperimentSpec, ModeSpec
from .statuses import COMPLETE, DONE, FAILED, INTERRUPTED, PENDING, RUNNING, Status


@dataclass(frozen=True)
class Cell:
    """One run of an experiment: its mode, copy count and repeat, and the id that names it in every manifest."""

    mode: ModeSpec
    copies: int
    repeat: int
    cell_id: str

    @property
    def label(self) -> str:
        """The cell as people read it: `<mode label>-x<copies>-r<repeat>` (its run folders end with it)."""
        return f"{self.mode.label}-x{self.copies}-r{self.repeat}"


@dataclass(frozen=True)
class CellState:
    """What the experiment folder holds of one cell: its run's status (a complete run if it has one, else the
    latest), that run, and the GPU and host it ran on."""

    cell_id: str
    status: Status
    run: RunDir
    gpu: int | None
    host: str | None


def jobs_fingerprint(spec: ExperimentSpec) -> str:
    """Ten hex digits that change whenever anything a job does changes (model, budget, batch size, ...)."""
    text = json.dumps([job.to_dict() for job in spec.jobs], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def cells(spec: ExperimentSpec) -> list[Cell]:
    """Every cell of `spec`, in run order."""
    fingerprint = jobs_fingerprint(spec)
    return [Cell(mode, copies, repeat, f"{safe_name(mode.label)}-x{copies}-r{repeat}-{fingerprint}")
            for mode, copies, repeat in spec.runs()]


def cell_states(experiment_dir: str | Path) -> dict[str, CellState]:
    """The state of every cell that has a run under `experiment_dir`: complete if any of its runs completed, else
    the latest run's status ("running" only where that run's process is still alive, else "interrupted")."""
    found: dict[str, CellState] = {}
    runs = find_runs(experiment_dir) if Path(experiment_dir).exists() else []
    for run in runs:
        try:
            manifest = run.read_manifest()
        except BrokenRun:
            continue  # not a run of any cell: `load()` names it; its cell, if any, runs again
        if manifest.cell_id is None:
            continue
        state = CellState(manifest.cell_id, _status(manifest), run, manifest.gpu, manifest.machine.hostname)
        previous = found.get(manifest.cell_id)
        if previous is None or previous.status != COMPLETE:  # runs are sorted by path: by start time
            found[manifest.cell_id] = state
    return found


def _status(manifest: Manifest) -> Status:
    """The run's status, "running" only while the process that runs it lives."""
    if manifest.status == RUNNING and not _alive(manifest.runner_pid, manifest.machine.hostname):
        return INTERRUPTED  # the process that ran it died before completing the manifest
    return manifest.status


def _alive(pid: int | None, hostname: str | None) -> bool:
    """Whether the process that runs a cell still lives; one on another host (a Slurm node) is taken as alive."""
    if pid is None:
        return False
    if hostname and hostname != socket.gethostname():
        return True
    return psutil.pid_exists(pid)


def experiment_status(experiment_dir: str | Path) -> list[dict]:
    """One row per cell the folder knows (its spec files' cells in order, then cells only its runs name): done,
    running, failed or pending, with the GPU and host it ran on and its Slurm job where it was submitted.

    >>> [(r["cell"], r["status"], r["slurm_job"]) for r in experiment_status("runs/seed-mixed")]   # doctest: +SKIP
    [('naive-x1-r0-3f9a0c1d2e', 'done', '4242_0'), ('mps-x1-r0-3f9a0c1d2e', 'pending', '4242_1')]
    """
    from .slurm import queue_states, submitted

    exp_dir = Path(experiment_dir)
    labels: dict[str, str] = {}
    for spec_file in sorted((exp_dir / "specs").glob("*.json"), key=lambda p: p.stat().st_mtime):
        for cell in cells(ExperimentSpec.from_mapping(json.loads(spec_file.read_text()))):
            labels.setdefault(cell.cell_id, cell.label)
    states = cell_states(exp_dir)
    jobs = submitted(exp_dir)
    queue = queue_states(list(jobs.values()))
    rows = []
    for cell_id in [*labels, *(c for c in states if c not in labels)]:
        state, job = states.get(cell_id), jobs.get(cell_id)
        if state is not None and state.status == COMPLETE:
            status, detail = DONE, ""
        elif job in queue:
            status, detail = (RUNNING if queue[job] == "RUNNING" else PENDING), f"Slurm: {queue[job]}"
        elif state is not None and state.status == RUNNING:
            status, detail = RUNNING, ""
        elif state is not None:
            status, detail = FAILED, state.status
        elif job is not None:
            status, detail = FAILED, f"the Slurm task ended without a run; its log: {exp_dir / 'slurm' / job}"
        else:
            status, detail = PENDING, ""
        rows.append({"cell": cell_id, "status": status, "detail": detail,
                     "gpu": state.gpu if state else None, "host": state.host if state else None,
                     "slurm_job": job, "run": state.run.run_id if state else None})
    return rows
