"""The executor of this process: the cells one after another on one GPU (or the CPU) as one lane (lane.py), their
jobs forked from one zygote that imports torch once for the whole experiment.

    >>> executor = HereExecutor(spec, ExperimentFolder.of("runs", spec.name))      # doctest: +SKIP
    >>> [job.result() for job in executor.submit(cells(spec))]                      # doctest: +SKIP
    ['complete', 'complete']
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from colloc_kit import machine
from colloc_kit.analysis.results import RunReading
from colloc_kit.pipeline.cell import Placement, preflight
from colloc_kit.pipeline.cells import Cell, warm_order
from colloc_kit.pipeline.executors.base import CellJob, Executor, FinishedCell
from colloc_kit.pipeline.lane import Lane
from colloc_kit.pipeline.progress import Progress
from colloc_kit.statuses import Status

__all__ = ["HereExecutor", "run_in_this_process"]


class HereExecutor(Executor):
    """Runs the cells in this process on the spec's GPU (`gpu`)."""

    name = "here"

    def check(self) -> None:
        """Every job and every mode's copy counts checked on the spec's GPU."""
        preflight(self.spec, gpus=[self.spec.gpu])

    def _submit(self, cells: list[Cell], spec_file: Path) -> list[CellJob]:
        if not cells:
            return []
        info = machine.describe()
        placement = Placement.on(info, self.folder.write_machine(info), self.spec.gpu, self.spec.device)
        return run_in_this_process(self, cells, placement)


def run_in_this_process(executor: Executor, cells: list[Cell], placement: Placement) -> list[CellJob]:
    """`cells` one after another in this process at `placement`, as one lane."""
    progress = executor.progress
    bar = progress if isinstance(progress, Progress) else Progress(total_runs=len(cells), enabled=bool(progress))
    started: list[tuple[Cell, Status, Future[RunReading]]] = []
    try:
        with Lane(executor.spec, placement, executor.folder.out, bar) as lane:  # leaves once every cell is read back
            for cell in warm_order(cells) if executor.spec.warm_repeats else cells:
                ran = lane.start(cell)
                if ran is not None:  # None: left to another kit on the folder (said)
                    started.append((cell, *ran))
            lane.kept.close()  # a launch kept warm ends with its experiment: the next one's checks find the GPU free
    finally:
        bar.close()
    return [FinishedCell(cell, status, reading.result()) for cell, status, reading in started]
