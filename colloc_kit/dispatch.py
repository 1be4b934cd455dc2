"""Run an experiment's cells on several GPUs of one host: one cell per GPU at a time, each cell in its own process.

Each cell process (`python -m colloc_kit.experiment ...`, the same `run_cell` as a one-GPU run) owns its GPU for
its whole run: its mode (a private MPS daemon with its own pipe directory under the run, MIG changes on that GPU
only), its monitor sampling that GPU, its jobs pinned with CUDA_VISIBLE_DEVICES=<GPU UUID>. The host's cores are
divided among the GPUs (each cell process and its workers are pinned to their share; the launcher divides CPU
threads within it). Ctrl-C or SIGTERM interrupts every cell process once and waits for each to stop its jobs and
restore its GPU; a dispatcher killed outright takes its cells with it (they get SIGTERM from the kernel).

    >>> places = [Placement.on(info, machine_file, g, "cuda") for g in (0, 1)]   # doctest: +SKIP
    >>> dispatch(spec_file, todo, places, Path("runs"))                           # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from .progress import GpuBoard

if TYPE_CHECKING:
    from .cells import Cell
    from .experiment import Placement

POLL_S = 0.1
STOP_TIMEOUT_S = 120.0  # a cell's jobs stop within seconds; an MPS daemon's quit is bounded at about 30 s
LOGS_DIR = "dispatch"  # <experiment>/dispatch/<cell label>.stderr.log: each cell process's stderr
_PR_SET_PDEATHSIG = 1


@dataclass
class _Running:
    cell: "Cell"
    label: str
    proc: subprocess.Popen
    log: Path
    pump: threading.Thread


def dispatch(spec_file: Path, todo: list["Cell"], placements: list["Placement"], out: Path,
             progress: bool = True) -> dict[str, int]:
    """Run `todo` over `placements` (one per GPU), a new cell on a GPU as soon as its last one ends; returns each
    cell's exit code (0 complete, 1 failed jobs, 3 error). An interrupt stops every cell, then propagates."""
    labels = [f"GPU {p.gpu}" for p in placements]
    board = GpuBoard(labels, total_cells=len(todo), enabled=progress)
    exp_dir = spec_file.parent.parent
    shares = core_shares(len(placements))
    queue = list(todo)
    running: dict[int, _Running] = {}
    codes: dict[str, int] = {}
    try:
        while queue or running:
            for slot, placement in enumerate(placements):
                if slot not in running and queue:
                    running[slot] = _start(queue.pop(0), placement, labels[slot], shares[slot], spec_file, out,
                                           exp_dir / LOGS_DIR, board)
            for slot, cell_run in list(running.items()):
                code = cell_run.proc.poll()
                if code is None:
                    continue
                del running[slot]
                cell_run.pump.join(timeout=5)
                codes[cell_run.cell.cell_id] = code
                board.cell_finished()
                said = _last_line(cell_run.log)
                if code != 0 and said:  # an error, or a crash of the cell process itself (not failed jobs)
                    board.write(f"{cell_run.label}: cell {cell_run.cell.label} ended with code {code}: {said} "
                                f"(all of it: {cell_run.log})")
                board.show(cell_run.label, f"{cell_run.cell.label} done" if code == 0 else
                           f"{cell_run.cell.label} {'failed jobs' if code == 1 else 'error'}")
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        _stop(list(running.values()), board)
        raise
    finally:
        board.close()
    return codes


def core_shares(n_gpus: int) -> list[list[int]]:
    """This process's cores split into `n_gpus` contiguous shares (shared round-robin where cores are fewer).

    >>> core_shares(2)                       # on 8 cores               # doctest: +SKIP
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < n_gpus:
        return [[cores[i % len(cores)]] for i in range(n_gpus)]
    size = len(cores) // n_gpus
    return [cores[i * size:(i + 1) * size] for i in range(n_gpus)]


def _start(cell: "Cell", placement: "Placement", label: str, cores: list[int], spec_file: Path, out: Path,
           logs: Path, board: GpuBoard) -> _Running:
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{cell.label}.gpu{placement.gpu}.stderr.log"
    command = [sys.executable, "-m", "colloc_kit.experiment", str(spec_file), cell.cell_id, str(out),
               "--gpu", str(placement.gpu), "--machine-file", str(placement.machine_file)]
    with open(log, "ab") as stderr:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                start_new_session=True,  # a terminal's Ctrl-C reaches the dispatcher only: it
                                preexec_fn=lambda: _child_setup(cores))  # forwards one interrupt per cell
    board.show(label, f"{cell.label}: starting")
    pump = threading.Thread(target=_pump, args=(proc, label, board), name=f"cell-{label}", daemon=True)
    pump.start()
    return _Running(cell, label, proc, log, pump)


def _child_setup(cores: list[int]) -> None:
    """In the cell process before it starts: pinned to its cores, and sent SIGTERM if the dispatcher dies."""
    os.sched_setaffinity(0, cores)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _pump(proc: subprocess.Popen, label: str, board: GpuBoard) -> None:
    """Each line a cell process prints is its current state: shown on its GPU's line."""
    for raw in proc.stdout:
        text = raw.decode("utf-8", "replace").strip()
        if text:
            board.show(label, text)
    proc.stdout.close()


def _stop(running: list[_Running], board: GpuBoard) -> None:
    """Interrupt every cell process once and wait for each to stop its jobs and restore its GPU; kill what is still
    there after STOP_TIMEOUT_S, or at once on a second interrupt."""
    for cell_run in running:
        board.show(cell_run.label, f"{cell_run.cell.label}: stopping")
        _signal(cell_run.proc, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    try:
        for cell_run in running:
            try:
                cell_run.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for cell_run in running:
            if cell_run.proc.poll() is None:
                board.write(f"{cell_run.label}: cell {cell_run.cell.label} did not stop in time; killed with its "
                            f"workers (its MPS watchdog quits the daemon); see {cell_run.log}")
                _kill_tree(cell_run.proc)
            cell_run.proc.wait()
            cell_run.pump.join(timeout=5)


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a cell process and every process below it (its workers run in sessions of their own)."""
    try:
        below = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        below = []
    for process in below:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    _signal(proc, signal.SIGKILL)


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] if path.exists() else []
    return lines[-1] if lines else ""
