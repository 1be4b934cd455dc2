"""An experiment folder's cells as `colloc-kit status` shows them: done, running, failed or pending, with the GPU
and host each ran on and its Slurm job where it was submitted.

    >>> [(r["cell"], r["status"], r["slurm_job"]) for r in experiment_status("runs/seed-mixed")]   # doctest: +SKIP
    [('naive-x1-r0-3f9a0c1d2e', 'done', '4242_0'), ('mps-x1-r0-3f9a0c1d2e', 'pending', '4242_1')]
"""

from __future__ import annotations

from pathlib import Path

from colloc_kit.errors import BrokenRun
from colloc_kit.pipeline.cells import cells
from colloc_kit.pipeline.executors.slurm import queue_states
from colloc_kit.statuses import COMPLETE, DONE, FAILED, PENDING, RUNNING, Status
from colloc_kit.store.folder import CellState, ExperimentFolder

__all__ = ["experiment_status"]


def experiment_status(experiment_dir: str | Path) -> list[dict]:
    """One row per cell the folder knows (its spec files' cells in order, then cells only its runs name); what in
    the folder cannot be read is passed over here, and named by `ExperimentFolder.damaged()`."""
    folder = ExperimentFolder(Path(experiment_dir))
    labels: dict[str, str] = {}
    states = folder.cell_states()
    for spec in folder.specs():
        for cell in cells(spec):  # a lone baseline's repeat past `repeats` only once run (precision.py)
            if cell.repeat < spec.repeats or cell.cell_id in states:
                labels.setdefault(cell.cell_id, cell.label)
    try:
        jobs = folder.submitted()
    except BrokenRun:  # named by `folder.damaged()`; the cells are read from their runs
        jobs = {}
    queue = queue_states(list(jobs.values()))
    rows = []
    for cell_id in [*labels, *(c for c in states if c not in labels)]:
        state, job = states.get(cell_id), jobs.get(cell_id)
        status, detail = _cell_status(state, job, queue, folder)
        rows.append({"cell": cell_id, "status": status, "detail": detail,
                     "gpu": state.gpu if state else None, "host": state.host if state else None,
                     "slurm_job": job, "run": state.run.run_id if state else None})
    return rows


def _cell_status(state: CellState | None, job: str | None, queue: dict[str, str],
                 folder: ExperimentFolder) -> tuple[Status, str]:
    """A cell's status (statuses.CELL_STATUSES) and a detail, from its runs and its Slurm task."""
    if state is not None and state.status == COMPLETE:
        return DONE, ""
    if job in queue:
        return (RUNNING if queue[job] == "RUNNING" else PENDING), f"Slurm: {queue[job]}"
    if state is not None and state.status == RUNNING:
        return RUNNING, ""
    if state is not None:
        return FAILED, state.status
    if job is not None:
        return FAILED, f"the Slurm task ended without a run; its log: {folder.slurm_dir / job}"
    return PENDING, ""
