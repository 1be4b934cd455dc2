"""The executor of several GPUs of this host: a lane per GPU for the whole experiment, each in its own process.

Each lane process (`python -m colloc_kit.pipeline.entry ...`, lane.py) owns its GPU: its mode (a private MPS daemon
with its own pipe directory under the run, MIG changes on that GPU only), its monitor sampling that GPU, its jobs
forked from its own zygote (imports and cuDNN loaded once per lane) with CUDA_VISIBLE_DEVICES=<GPU UUID>. The
dispatcher (dispatcher.py) hands each idle lane the next cell of one queue (on stdin; `dispatch_order`: longer cells
first within a repeat), whatever GPU, and hears it end (a CELL_ENDED line). With pinned placement the host's cores
are divided among the GPUs (each lane process and its workers pinned to its block; the launcher divides the block
among a cell's jobs). Ctrl-C or SIGTERM interrupts every lane once and waits for each to stop its jobs and restore its
GPU, and so does any other exception that ends the dispatcher; a dispatcher killed outright takes its lanes with it
(they get SIGTERM from the kernel, and a lane's zygote leaves with it).

Alone, `submit` returns once its cells have ended. Inside `kept_lanes`, the lanes stay for the next experiment and
`submit` returns at once, with handles whose waiting drives the lanes: several experiments' cells can share the queue.

    >>> executor = GpusExecutor(spec, ExperimentFolder.of("runs", spec.name))      # doctest: +SKIP
    >>> {job.cell.label: job.result() for job in executor.submit(cells(spec))}      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Iterator

from colloc_kit import machine, supervise
from colloc_kit.pipeline.cell import Placement, preflight
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.executors.base import CellJob, Executor, FinishedCell
from colloc_kit.pipeline.executors.dispatcher import Dispatcher
from colloc_kit.pipeline.executors.here import run_in_this_process
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.pipeline.progress import GpuBoard

__all__ = ["GpusExecutor", "kept_lanes"]


class GpusExecutor(Executor):
    """Runs the cells over the GPUs the spec names (`gpus`: a list of indices, or "all")."""

    name = "gpus"

    @functools.cached_property
    def machine_info(self) -> dict:
        """This machine as described once for the experiment (its GPUs, host, MPS): checked, then stored."""
        return machine.describe()

    def placements(self) -> list[Placement]:
        """One placement per GPU of the spec (the machine description stored in the experiment folder)."""
        machine_file = self.folder.write_machine(self.machine_info)
        return [Placement.on(self.machine_info, machine_file, gpu["index"], self.spec.device)
                for gpu in self._chosen_gpus()]

    def check(self) -> None:
        """The GPUs named exist; every job and every mode's copy counts checked on each of them."""
        preflight(self.spec, gpus=[g["index"] for g in self._chosen_gpus()])

    def settle(self) -> None:
        """The lanes kept for the next experiment close the launch they keep (warm repeats), unless cells still run
        on them: the next experiment's checks meet no job, nor MPS daemon, of this one."""
        kept = _KEPT[-1].get(self._key()) if _KEPT and len(self._chosen_gpus()) > 1 else None
        if kept is not None and kept.idle():
            kept.release_kept()

    def _chosen_gpus(self) -> list[dict]:
        """The GPUs of this machine that the spec's `gpus` names."""
        assert self.spec.gpus is not None, "the gpus executor runs a spec that names its gpus"
        return machine.chosen_gpus(self.spec.gpus, self.machine_info["gpus"], self.machine_info["gpu_reason"])

    def _submit(self, cells: list[Cell], spec_file: Path) -> list[CellJob]:
        if not cells:
            return []
        placements = self.placements()
        if len(placements) == 1:  # one GPU: its lane in this process, as `here` runs it, on that GPU
            return run_in_this_process(self, cells, placements[0])
        kept = _KEPT[-1] if _KEPT else None
        if kept is not None:  # the lanes stay: the handles are waited for by the caller, the lanes closed by the block
            if self._key() not in kept:
                kept[self._key()] = self._dispatcher(placements)
            return list(kept[self._key()].add(cells, spec_file, self.folder, self.spec.warm_repeats,
                                                  placements[0].machine_file))
        dispatcher = self._dispatcher(placements)
        try:
            handles = dispatcher.add(cells, spec_file, self.folder, self.spec.warm_repeats, placements[0].machine_file)
            dispatcher.wait(handles)
        except BaseException:  # an interrupt, and anything else that ends the dispatcher (an error, a test's
            dispatcher.stop()  # timeout): its lanes never train on without it
            raise
        dispatcher.close()
        return [FinishedCell(handle.cell, handle.result()) for handle in handles]

    def _dispatcher(self, placements: list[Placement]) -> Dispatcher:
        """A dispatcher with a lane (not yet started) for each GPU, showing its progress on a board of its own."""
        board = GpuBoard([f"GPU {p.gpu}" for p in placements], enabled=bool(self.progress))
        return Dispatcher(placements, self._shares(), board)

    def _shares(self) -> list[list[int] | None]:
        """Each GPU's block of the host's cores (pinned placement), else None for each."""
        count = len(self._chosen_gpus())
        if self.spec.placement != "pinned":
            return [None] * count
        return list(supervise.split_cores(supervise.host_cores(), count))

    def _key(self) -> tuple:
        """What a kept dispatcher serves: these GPUs, with these cores."""
        return tuple(g["index"] for g in self._chosen_gpus()), tuple(map(str, self._shares()))


_KEPT: list[dict] = []  # the open `kept_lanes` blocks, innermost last: {(GPUs, core shares): Dispatcher}


@contextlib.contextmanager
def kept_lanes() -> Iterator[None]:
    """Lanes kept across experiments: inside the block, each run over several GPUs queues its cells on the lanes the
    last one started (the same GPUs and cores), and `submit` returns at once (its handles' waiting drives the lanes),
    and runs on one GPU share one zygote in this process (`lane.shared_zygote`); so a matrix of several experiments
    (`seed-NN`'s, a benchmark's) starts each lane and its zygote once, not once per experiment. The lanes leave when
    the block ends; an exception out of it (an interrupt) stops them first.

        with kept_lanes():
            for spec in specs:
                run_spec(spec)
    """
    kept: dict = {}
    _KEPT.append(kept)
    try:
        with shared_zygote():  # one GPU: the lane in this process, its zygote kept alike
            yield
    except BaseException:
        for dispatcher in kept.values():
            dispatcher.stop()
        raise
    else:
        for dispatcher in kept.values():
            dispatcher.close()
    finally:
        _KEPT.remove(kept)
