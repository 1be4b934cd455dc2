"""A lane: the cells one GPU runs, one after another in one process, their jobs forked from one zygote that lives as
long as the lane. One GPU runs a lane in the kit's own process; several GPUs run one lane process each (`entry.py`,
started by the `gpus` executor); a Slurm array task runs its cells as a lane. So torch's imports and cuDNN's library
loading are paid once per lane, not once per cell; and a cell's read-back (its figures, `jobs.csv`, MLflow) runs in
the lane's reader thread while the next cell starts (`start`), not between the two.

    >>> with Lane(spec, placement, Path("runs"), Progress(total_runs=2)) as lane:       # doctest: +SKIP
    ...     [lane.run(cell).summary["status"] for cell in cells(spec)]
    ['complete', 'complete']
"""

from __future__ import annotations

import contextlib
import functools
import socket
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from colloc_kit.analysis.results import RunReading
from colloc_kit.pipeline.cell import Placement
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.precision import precision_repeat, still_short
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.report import run_read_later
from colloc_kit.pipeline.warm import Kept
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import COMPLETE, RUNNING, Status
from colloc_kit.store import claims
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.worker.process import quick_start
from colloc_kit.worker.zygote import Zygote, enabled

__all__ = ["Lane", "shared_zygote"]


class Lane(contextlib.AbstractContextManager):
    """Runs cells of `spec` at `placement` into `out`, in this process (see the module). A context manager: entering
    starts the zygote (where the system has one), leaving ends it."""

    def __init__(self, spec: ExperimentSpec, placement: Placement, out: Path, bar: Progress,
                 zygote: Zygote | None = None, kept: Kept | None = None):
        """`zygote`: one the lane shares (a lane process's, for every experiment it runs); else its own. `kept`: the
        launch its GPU keeps between cells (`pipeline.warm`), shared likewise; else its own."""
        self.spec, self.placement, self.out, self.bar = spec, placement, Path(out), bar
        self._stack = contextlib.ExitStack()
        self.zygote: Zygote | None = zygote
        self.kept, self._own_kept = kept or Kept(), kept is None
        self._reader: ThreadPoolExecutor | None = None
        self._precise: set[str] = set()  # series found precise: their further precision repeats passed

    def __enter__(self) -> "Lane":
        # a lane of a `shared_zygote` block: the block's zygote, given to it or started by its first lane
        block = _THREADS.block
        if self.zygote is None and block is not None:
            if block.zygote is None:
                block.zygote = block.stack.enter_context(Zygote.for_experiment(self.spec.jobs))
                block.stack.callback(block.kept.close)  # before its zygote ends: jobs, then mode
            self.zygote = block.zygote if enabled() else None  # a given one too, only while zygotes are on
            self.kept, self._own_kept = block.kept, False
        if self.zygote is None:
            self.zygote = self._stack.enter_context(Zygote.for_experiment(self.spec.jobs))
        if self._own_kept:
            self._stack.callback(self.kept.close)  # a launch kept at the lane's end: its jobs stopped, mode left
        if quick_start():  # the last cell read back while the next starts; left only once every reading is in
            self._reader = self._stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="read-back"))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def run(self, cell: Cell) -> RunReading | None:
        """Run `cell` and read it back (`report.run_reported`): `start`, then its reading waited for."""
        started = self.start(cell)
        return None if started is None else started[1].result()

    def start(self, cell: Cell) -> tuple[Status, Future[RunReading]] | None:
        """Run `cell`; its status (from its manifest) and its reading to come: read back by the lane's reader thread
        while the lane's next cell starts (`worker.process.quick_start`; else here, before this returns). An
        interrupt or an error of the kit propagates. None, said on stderr, where another live process holds the
        cell's claim (`store.claims`) or its folder has it complete or running by now (another kit on the folder):
        one owner per cell, and no cell measured twice; and it waits while another kit of the folder runs a cell on
        its device (`claims.turn`): never two cells beside each other. None too, said nowhere, for a precision repeat
        of a series already precise (`precision.still_short`): passed over."""
        folder = ExperimentFolder.of(self.out, self.spec.name)
        if precision_repeat(self.spec, cell) and (cell.series in self._precise
                                                  or not still_short(self.spec, folder, cell)):
            self._precise.add(cell.series)
            return None
        device = f"{self.spec.device}-{socket.gethostname()}-{self.placement.gpu}"
        with claims.turn(folder.path, device, functools.partial(_say_waiting, cell, device)), \
                claims.claimed(folder.path, cell.cell_id) as other:
            state = folder.cell_states().get(cell.cell_id) if other is None else None
            why = f"held by {claims.describe(other)}" if other is not None else None
            if state is not None and state.status in (COMPLETE, RUNNING):  # (state is None where another holds it)
                why = f"{state.status} in {state.run.path.name}"
            if why is not None:
                print(f"colloc-kit: cell {cell.label} left to another kit on {folder.path} ({why}); not run here",
                      file=sys.stderr, flush=True)
                return None
            if not self.spec.warm_repeats:
                self.kept.close()  # a launch kept by another experiment of this lane: the GPU is this cell's
            started = run_read_later(self.spec, cell, self.placement, self.out, self.bar, self.zygote, self._reader,
                                     self.kept if self.spec.warm_repeats else None)
        started[1].add_done_callback(functools.partial(_say_failed, cell))
        return started


def _say_waiting(cell: Cell, device: str, other: dict) -> None:
    print(f"colloc-kit: cell {cell.label} waits: another kit on this folder runs a cell on {device} "
          f"({claims.describe(other)})", file=sys.stderr, flush=True)


@dataclass
class _Shared:
    stack: contextlib.ExitStack
    zygote: Zygote | None = None
    kept: Kept = field(default_factory=Kept)


class _Blocks(threading.local):
    """The open `shared_zygote` block of one thread, if any: a panel's runs in a background thread and the kernel's
    own cells each keep to their own."""

    def __init__(self) -> None:
        self.block: _Shared | None = None


_THREADS = _Blocks()


@contextlib.contextmanager
def shared_zygote(zygote: Zygote | None = None) -> Iterator[None]:
    """Inside the block, the lanes this thread starts share one zygote: `zygote` where one is given (started earlier
    and kept past the block: a test session's), else one started by the first lane for its experiment's models and
    ended with the block. Several experiments run one after another on one GPU so import torch once. They share the
    GPU's kept launch too (`pipeline.warm`), closed with the block. A block inside another is part of it
    (`run_spec`'s in a sweep's); another thread's lanes keep their own; with the zygote turned off
    (`zygote.enabled`), none is shared.

        with shared_zygote():
            colloc_kit.run_spec(first)
            colloc_kit.run_spec(second)   # its jobs forked from the zygote `first` started
    """
    if _THREADS.block is not None:
        yield
        return
    with contextlib.ExitStack() as stack:
        _THREADS.block = _Shared(stack, zygote)
        if zygote is not None:
            stack.callback(_THREADS.block.kept.close)  # the given zygote outlives the block; its kept launch does not
        try:
            yield
        finally:
            _THREADS.block = None


def _say_failed(cell: Cell, reading: Future[RunReading]) -> None:
    """Name on stderr a cell whose read-back failed (its run is on disk; `colloc-kit show` reads it again)."""
    if not reading.cancelled() and reading.exception() is not None:
        print(f"colloc-kit: cell {cell.label}: reading it back failed: {reading.exception()!r}", file=sys.stderr,
              flush=True)
