"""The executor of several GPUs of this host: a lane per GPU for the whole experiment, each in its own process.

Each lane process (`python -m colloc_kit.pipeline.entry ...`, lane.py) owns its GPU: its mode (a private MPS daemon
with its own pipe directory under the run, MIG changes on that GPU only), its monitor sampling that GPU, its jobs
forked from its own zygote (imports and cuDNN loaded once per lane) with CUDA_VISIBLE_DEVICES=<GPU UUID>. The
dispatcher hands each idle lane the next cell of one queue (on stdin; `dispatch_order`: longer cells first within
a repeat), whatever GPU, and hears it end (a CELL_ENDED line). With pinned placement
the host's cores are divided among the lanes (each lane process and its workers pinned to its block; the launcher
divides the block among a cell's jobs). Ctrl-C or SIGTERM interrupts every lane once and waits for each to stop its
jobs and restore its GPU, and so does any other exception that ends the dispatcher; a dispatcher killed outright takes
its lanes with it (they get SIGTERM from the kernel, and a lane's zygote leaves with it).

    >>> executor = GpusExecutor(spec, ExperimentFolder.of("runs", spec.name))      # doctest: +SKIP
    >>> {job.cell.label: job.result() for job in executor.submit(cells(spec))}      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from colloc_kit import machine, supervise
from colloc_kit.pipeline.cell import Placement, preflight
from colloc_kit.pipeline.cells import Cell, warm_order
from colloc_kit.pipeline.entry import CELL_ENDED, EXIT_CODES, RELEASE_KEPT
from colloc_kit.pipeline.executors.base import CellJob, Executor, FinishedCell
from colloc_kit.pipeline.executors.here import run_in_this_process
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.pipeline.progress import GpuBoard
from colloc_kit.statuses import COMPLETE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, Status

__all__ = ["LANE_ENTRY", "GpusExecutor", "dispatch_order", "kept_lanes"]

LANE_ENTRY = "colloc_kit.pipeline.entry"  # what each lane process runs (`python -m`)
STATUS_OF_CODE = {code: status for status, code in EXIT_CODES.items()}
POLL_S = 0.05
STOP_TIMEOUT_S = 120.0  # a cell's jobs stop within seconds; an MPS daemon's quit is bounded at about 30 s


@dataclass
class _LaneProcess:
    """One GPU's lane process and the cell it runs now (None: idle)."""

    label: str
    placement: Placement
    proc: subprocess.Popen[bytes]
    log: Path
    pump: threading.Thread
    cell: Cell | None = None
    last: Cell | None = None  # the cell it was handed last
    ended: "queue.Queue[tuple[str, int]]" = field(default_factory=queue.Queue)  # (cell id, code) per CELL_ENDED line
    released: threading.Event = field(default_factory=threading.Event)  # it closed its kept launch, as told
    shown_on: dict = field(default_factory=dict)  # {"board": the GpuBoard of the experiment it serves now}

    def hand(self, cell: Cell, order: dict) -> None:
        """Give the lane its next cell, with its experiment (`order`: spec file, out, machine file); a lane that
        just died ends it with its exit code (`_heard`)."""
        self.cell = self.last = cell
        self.tell({**order, "cell": cell.cell_id})

    def tell(self, order: dict) -> None:
        """One order on the lane's stdin (a lane that just died misses it)."""
        assert self.proc.stdin is not None  # a pipe
        try:
            self.proc.stdin.write(f"{json.dumps(order)}\n".encode())
            self.proc.stdin.flush()
        except OSError:
            pass


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
        if len(placements) == 1:  # one GPU: its lane in this process, as `here` runs it, on that GPU
            return run_in_this_process(self, cells, placements[0])
        placements = placements[:len(cells)]  # a lane per GPU that gets a cell
        labels = [f"GPU {p.gpu}" for p in placements]
        board = GpuBoard(labels, total_cells=len(cells), enabled=bool(self.progress))
        shares = (supervise.split_cores(supervise.host_cores(), len(placements)) if self.spec.placement == "pinned"
                  else [None] * len(placements))
        todo: list[Cell] = warm_order(cells) if self.spec.warm_repeats else dispatch_order(cells)
        codes: dict[str, int] = {}
        order = {"spec": str(spec_file), "out": str(self.folder.out), "machine_file": str(placements[0].machine_file)}

        def start(slot: int) -> _LaneProcess:
            return self._start(placements[slot], labels[slot], shares[slot], spec_file, board)

        kept, key = (_KEPT[-1] if _KEPT else None), (tuple(labels), tuple(map(str, shares)))
        lanes: list[_LaneProcess] = kept.pop(key, []) if kept is not None else []  # held here while in use
        try:
            for lane in lanes:
                lane.shown_on["board"] = board
            for slot in range(len(lanes), len(placements)):
                lanes.append(start(slot))
            while todo or any(lane.cell for lane in lanes):
                for slot, lane in enumerate(lanes):
                    if _heard(lane, codes, board) and todo:  # the lane died: a fresh one takes its place
                        lanes[slot] = lane = start(slot)
                    if lane.cell is None and todo:
                        cell = todo.pop(_next_for(lane, todo, lanes))
                        lane.hand(cell, order)
                        board.show(lane.label, f"{cell.label}: starting")
                time.sleep(POLL_S)
            if self.spec.warm_repeats:  # the next experiment's checks must not meet a kept launch (its MPS daemon)
                _release_kept(lanes)
            if kept is None:
                _close(lanes)
            else:  # a later experiment of the `kept_lanes` block takes them on
                kept[key] = lanes
        except BaseException:  # an interrupt, and anything else that ends the dispatcher (an error, a test's
            _stop(lanes, board)  # timeout): its lanes never train on without it
            raise
        finally:
            board.close()
        return [FinishedCell(cell, STATUS_OF_CODE.get(codes[cell.cell_id], RUN_ERROR)) for cell in cells]

    def _start(self, placement: Placement, label: str, cores: list[int] | None, spec_file: Path,
               board: GpuBoard) -> _LaneProcess:
        log, dispatcher = self.folder.dispatch_log("lane", placement.gpu), os.getpid()
        command = [sys.executable, "-m", LANE_ENTRY, str(spec_file), "--gpu", str(placement.gpu)]
        with open(log, "ab") as stderr:
            proc = subprocess.Popen(  # in a session of its own: a terminal's Ctrl-C reaches the dispatcher only,
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,  # which forwards one per lane
                start_new_session=True, preexec_fn=lambda: _child_setup(cores, dispatcher))
        ended: queue.Queue = queue.Queue()
        released = threading.Event()
        shown_on = {"board": board}  # a kept lane shows its lines on the board of the experiment it serves now

        def heard(line: str) -> None:  # each line a lane prints is its state now, or the end of its cell
            if line.startswith(f"{CELL_ENDED} {RELEASE_KEPT} "):  # not a cell's end: its kept launch closed
                released.set()
            elif line.startswith(CELL_ENDED):
                _, cell_id, code = line.split()
                ended.put((cell_id, int(code)))
            elif line.strip():
                shown_on["board"].show(label, line.strip())

        assert proc.stdout is not None  # a pipe
        pump = supervise.pump_lines(proc.stdout, heard, name=f"lane-{label}")
        board.show(label, "starting its lane")
        return _LaneProcess(label, placement, proc, log, pump, ended=ended, released=released, shown_on=shown_on)


_KEPT: list[dict] = []  # the open `kept_lanes` blocks, innermost last: {(GPU labels, core shares): idle lanes}


@contextlib.contextmanager
def kept_lanes() -> Iterator[None]:
    """Lanes kept across experiments: inside the block, each run over several GPUs hands its cells to the lane
    processes the last one left (the same GPUs and cores), and runs on one GPU share one zygote in this process
    (`lane.shared_zygote`), so a matrix of several experiments (`seed-NN`'s, a benchmark's) starts each lane and its
    zygote once, not once per experiment; they leave when the block ends.

        with kept_lanes():
            for spec in specs:
                run_spec(spec)
    """
    kept: dict = {}
    _KEPT.append(kept)
    try:
        with shared_zygote():  # one GPU: the lane in this process, its zygote kept alike
            yield
    finally:
        _KEPT.remove(kept)
        for lanes in kept.values():
            _close(lanes)


def dispatch_order(cells: list[Cell]) -> list[Cell]:
    """The order lanes take `cells` in: a repeat after another as planned (repeats stay interleaved), and within a
    repeat the cells of more copies first (longer: more jobs to start, warm, stop; a sequential mode's run one by
    one), so that the last cells handed out are short ones and no lane runs long after the others are done. Each
    idle lane takes the next cell, whatever GPU: the lanes steal from one queue.

    >>> from colloc_kit.spec import ExperimentSpec, JobSpec
    >>> from colloc_kit.pipeline.cells import cells
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")], copies=[1, 3], repeats=2)
    >>> [c.label for c in dispatch_order(cells(spec))]
    ['naive-x3-r0', 'naive-x1-r0', 'naive-x3-r1', 'naive-x1-r1']
    """
    return sorted(cells, key=lambda cell: (cell.repeat, -cell.copies))


def _next_for(lane: _LaneProcess, todo: list[Cell], lanes: list[_LaneProcess]) -> int:
    """Where in `todo` the idle `lane`'s next cell is: the next repeat of the series it ran last (its launch may be
    kept warm: `pipeline.warm`), else the first cell of a series no other lane runs, else the first (a repeat of
    another lane's series, started afresh: no lane idles while cells wait)."""
    others = {other.last.series for other in lanes if other is not lane and other.last is not None}
    mine = [i for i, cell in enumerate(todo) if lane.last is not None and cell.series == lane.last.series]
    free = [i for i, cell in enumerate(todo) if cell.series not in others]
    return (mine or free or [0])[0]


def _child_setup(cores: list[int] | None, dispatcher: int) -> None:
    """In the lane process before it starts: pinned to its cores (pinned placement), and sent SIGTERM if the
    dispatcher dies."""
    if cores is not None:
        os.sched_setaffinity(0, cores)
    supervise.die_with_parent(dispatcher, signal.SIGTERM)


def _heard(lane: _LaneProcess, codes: dict[str, int], board: GpuBoard) -> bool:
    """Note each cell `lane` finished (its code into `codes`); True if the lane process died (its cell, if it had
    one, ends with the lane's exit code)."""
    while not lane.ended.empty():
        cell_id, code = lane.ended.get()
        codes[cell_id] = code
        _ended(lane, code, board)
    if lane.proc.poll() is None:
        return False
    lane.pump.join(timeout=5)  # its last lines
    if not lane.ended.empty():
        return _heard(lane, codes, board)
    if lane.cell is not None:
        codes[lane.cell.cell_id] = lane.proc.returncode
        _ended(lane, lane.proc.returncode, board)
    return True


def _ended(lane: _LaneProcess, code: int, board: GpuBoard) -> None:
    """Show how a lane's cell ended (the lane's last stderr line where it ended in an error); the lane is idle."""
    assert lane.cell is not None
    board.cell_finished()
    status: Status = STATUS_OF_CODE.get(code, RUN_ERROR)
    said = _last_line(lane.log)
    if status not in (COMPLETE, FAILED_JOBS, INTERRUPTED) and said:
        board.write(f"{lane.label}: cell {lane.cell.label} ended with code {code}: {said} (all of it: {lane.log})")
    board.show(lane.label, f"{lane.cell.label} done" if status == COMPLETE else
               f"{lane.cell.label} {'failed jobs' if status == FAILED_JOBS else status}")
    lane.cell = None


def _release_kept(lanes: list[_LaneProcess]) -> None:
    """Each lane closes the launch it keeps (`pipeline.warm`: its jobs stopped, its mode left), answered before
    STOP_TIMEOUT_S or by the lane's end."""
    for lane in lanes:
        lane.released.clear()
        lane.tell({RELEASE_KEPT: True})
        lane.last = None  # nothing kept: no series to keep to
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for lane in lanes:
        while lane.proc.poll() is None and time.monotonic() < deadline and not lane.released.wait(POLL_S):
            pass


def _close(lanes: list[_LaneProcess]) -> None:
    """Every cell done: end each lane's input, so that it leaves (its zygote with it); stop any that does not within
    STOP_TIMEOUT_S."""
    for lane in lanes:
        if lane.proc.stdin and not lane.proc.stdin.closed:
            lane.proc.stdin.close()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for lane in lanes:
        try:
            lane.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    supervise.stop_all([lane.proc for lane in lanes])
    for lane in lanes:
        lane.pump.join(timeout=5)


def _stop(lanes: list[_LaneProcess], board: GpuBoard) -> None:
    """Interrupt every lane once and wait for each to stop its jobs and restore its GPU; kill what is still there
    after STOP_TIMEOUT_S, or at once on a second interrupt."""
    for lane in lanes:
        board.show(lane.label, f"{lane.cell.label}: stopping" if lane.cell else "stopping")

    def killed(proc: supervise.Child) -> None:
        lane = next(r for r in lanes if r.proc is proc)
        board.write(f"{lane.label}: its lane did not stop in time; killed with its workers "
                    f"(its MPS watchdog quits the daemon); see {lane.log}")

    try:
        supervise.stop_all([lane.proc for lane in lanes], first=signal.SIGINT, grace_s=STOP_TIMEOUT_S, on_kill=killed)
    finally:
        for lane in lanes:
            lane.pump.join(timeout=5)
            if lane.proc.stdin and not lane.proc.stdin.closed:
                lane.proc.stdin.close()


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] if path.exists() else []
    return lines[-1] if lines else ""
