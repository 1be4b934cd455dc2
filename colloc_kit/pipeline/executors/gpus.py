"""The executor of several GPUs of this host: one cell per GPU at a time, each cell in its own process.

Each cell process (`python -m colloc_kit.pipeline.entry ...`, the same `run_reported` as one GPU runs) owns its
GPU for its whole run: its mode (a private MPS daemon with its own pipe directory under the run, MIG changes on that
GPU only), its monitor sampling that GPU, its jobs pinned with CUDA_VISIBLE_DEVICES=<GPU UUID>. The host's cores are
divided among the GPUs (each cell process and its workers are pinned to their share; the launcher divides them
within it). Ctrl-C or SIGTERM interrupts every cell process once and waits for each to stop its jobs and restore its
GPU; a dispatcher killed outright takes its cells with it (they get SIGTERM from the kernel).

    >>> executor = GpusExecutor(spec, ExperimentFolder.of("runs", spec.name))      # doctest: +SKIP
    >>> {job.cell.label: job.result() for job in executor.submit(cells(spec))}      # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ... import machine, supervise
from ...progress import GpuBoard
from ...statuses import COMPLETE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, Status
from ..cell import Placement, preflight
from ..cells import Cell
from .base import CellJob, Executor, FinishedCell
from .here import run_in_this_process

__all__ = ["CELL_ENTRY", "GpusExecutor"]

CELL_ENTRY = "colloc_kit.pipeline.entry"  # what each cell process runs (`python -m`)
EXIT_STATUS = {0: COMPLETE, 1: FAILED_JOBS, 130: INTERRUPTED}  # a cell process's exit code; else an error
POLL_S = 0.1
STOP_TIMEOUT_S = 120.0  # a cell's jobs stop within seconds; an MPS daemon's quit is bounded at about 30 s
_PR_SET_PDEATHSIG = 1


@dataclass
class _Running:
    cell: Cell
    label: str
    proc: subprocess.Popen[bytes]
    log: Path
    pump: threading.Thread


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

    def _chosen_gpus(self) -> list[dict]:
        """The GPUs of this machine that the spec's `gpus` names."""
        assert self.spec.gpus is not None, "the gpus executor runs a spec that names its gpus"
        return machine.chosen_gpus(self.spec.gpus, self.machine_info["gpus"], self.machine_info["gpu_reason"])

    def _submit(self, cells: list[Cell], spec_file: Path) -> list[CellJob]:
        if not cells:
            return []
        placements = self.placements()
        if len(placements) == 1:  # one GPU: in this process, as `here` runs them, on that GPU
            return run_in_this_process(self, cells, placements[0])
        labels = [f"GPU {p.gpu}" for p in placements]
        board = GpuBoard(labels, total_cells=len(cells), enabled=bool(self.progress))
        shares = supervise.split_cores(supervise.host_cores(), len(placements))
        queue, codes = list(cells), {}
        running: dict[int, _Running] = {}
        try:
            while queue or running:
                for slot, placement in enumerate(placements):
                    if slot not in running and queue:
                        running[slot] = self._start(queue.pop(0), placement, labels[slot], shares[slot], spec_file,
                                                    board)
                for slot, cell_run in list(running.items()):
                    if cell_run.proc.poll() is not None:
                        del running[slot]
                        codes[cell_run.cell.cell_id] = _ended(cell_run, board)
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            _stop(list(running.values()), board)
            raise
        finally:
            board.close()
        return [FinishedCell(cell, EXIT_STATUS.get(codes[cell.cell_id], RUN_ERROR)) for cell in cells]

    def _start(self, cell: Cell, placement: Placement, label: str, cores: list[int], spec_file: Path,
               board: GpuBoard) -> _Running:
        log = self.folder.dispatch_log(cell.label, placement.gpu)
        command = [sys.executable, "-m", CELL_ENTRY, str(spec_file), cell.cell_id, str(self.folder.out),
                   "--gpu", str(placement.gpu), "--machine-file", str(placement.machine_file)]
        with open(log, "ab") as stderr:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                    start_new_session=True,  # a terminal's Ctrl-C reaches the dispatcher only: it
                                    preexec_fn=lambda: _child_setup(cores))  # forwards one interrupt per cell
        board.show(label, f"{cell.label}: starting")

        def show(line: str) -> None:  # each line a cell process prints is its state now
            if line.strip():
                board.show(label, line.strip())

        assert proc.stdout is not None  # a pipe
        pump = supervise.pump_lines(proc.stdout, show, name=f"cell-{label}")
        return _Running(cell, label, proc, log, pump)


def _child_setup(cores: list[int]) -> None:
    """In the cell process before it starts: pinned to its cores, and sent SIGTERM if the dispatcher dies."""
    os.sched_setaffinity(0, cores)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _ended(cell_run: _Running, board: GpuBoard) -> int:
    """Show how a cell process ended (its last stderr line where it failed); returns its exit code."""
    code = cell_run.proc.returncode
    cell_run.pump.join(timeout=5)
    board.cell_finished()
    said = _last_line(cell_run.log)
    if code != 0 and said:  # an error, or a crash of the cell process itself (not failed jobs)
        board.write(f"{cell_run.label}: cell {cell_run.cell.label} ended with code {code}: {said} "
                    f"(all of it: {cell_run.log})")
    status: Status = EXIT_STATUS.get(code, RUN_ERROR)
    board.show(cell_run.label, f"{cell_run.cell.label} done" if code == 0 else
               f"{cell_run.cell.label} {'failed jobs' if status == FAILED_JOBS else 'error'}")
    return code


def _stop(running: list[_Running], board: GpuBoard) -> None:
    """Interrupt every cell process once and wait for each to stop its jobs and restore its GPU; kill what is still
    there after STOP_TIMEOUT_S, or at once on a second interrupt."""
    for cell_run in running:
        board.show(cell_run.label, f"{cell_run.cell.label}: stopping")

    def killed(proc: supervise.Child) -> None:
        cell_run = next(r for r in running if r.proc is proc)
        board.write(f"{cell_run.label}: cell {cell_run.cell.label} did not stop in time; killed with its workers "
                    f"(its MPS watchdog quits the daemon); see {cell_run.log}")

    try:
        supervise.stop_all([r.proc for r in running], first=signal.SIGINT, grace_s=STOP_TIMEOUT_S, on_kill=killed)
    finally:
        for cell_run in running:
            cell_run.pump.join(timeout=5)


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] if path.exists() else []
    return lines[-1] if lines else ""
