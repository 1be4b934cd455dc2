"""A lane: the cells one GPU runs, one after another in one process, their jobs forked from one zygote that lives as
long as the lane. One GPU runs a lane in the kit's own process; several GPUs run one lane process each (`entry.py`,
started by the `gpus` executor); a Slurm array task runs its cells as a lane. So torch's imports and cuDNN's library
loading are paid once per lane, not once per cell.

    >>> with Lane(spec, placement, Path("runs"), Progress(total_runs=2)) as lane:       # doctest: +SKIP
    ...     [lane.run(cell).summary["status"] for cell in cells(spec)]
    ['complete', 'complete']
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from colloc_kit.analysis.results import RunReading
from colloc_kit.pipeline.cell import Placement
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.report import run_reported
from colloc_kit.spec import ExperimentSpec
from colloc_kit.worker.zygote import Zygote

__all__ = ["Lane"]


class Lane(contextlib.AbstractContextManager):
    """Runs cells of `spec` at `placement` into `out`, in this process (see the module). A context manager: entering
    starts the zygote (where the system has one), leaving ends it."""

    def __init__(self, spec: ExperimentSpec, placement: Placement, out: Path, bar: Progress):
        self.spec, self.placement, self.out, self.bar = spec, placement, Path(out), bar
        self._stack = contextlib.ExitStack()
        self.zygote: Zygote | None = None

    def __enter__(self) -> "Lane":
        self.zygote = self._stack.enter_context(Zygote.for_experiment(job.model for job in self.spec.jobs))
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def run(self, cell: Cell) -> RunReading:
        """Run `cell` and read it back (`report.run_reported`); an interrupt or an error of the kit propagates."""
        return run_reported(self.spec, cell, self.placement, self.out, self.bar, self.zygote)
