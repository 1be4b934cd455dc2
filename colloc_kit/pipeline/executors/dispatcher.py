"""The lanes of several GPUs of this host and the one queue they take cells from (the `gpus` executor's engine).

A `Dispatcher` holds a lane process per GPU (`python -m colloc_kit.pipeline.entry ...`, started when the GPU's first
cell is handed out) and a queue of cells, each with its experiment's order (spec file, out, machine file). `add`
queues cells and returns a handle per cell at once (`LaneCell`); `pump` hears what each lane said, replaces a lane that
died while cells wait, and hands each idle lane its next cell (`_next_for`). A handle's `done()` pumps, so whoever
waits drives the lanes: one experiment waiting for its cells (`GpusExecutor`), or several experiments whose cells
share the queue (`experiments.seed_run`: the next experiment's cells queued while the last one's finish, so no lane
waits at an experiment's end). A cell queued while it is queued or running already shares that run.

    >>> dispatcher = Dispatcher(placements, shares, board)                         # doctest: +SKIP
    >>> handles = dispatcher.add(cells, spec_file, folder, False, machine_file)     # doctest: +SKIP
    >>> [h.result() for h in handles]                                              # doctest: +SKIP
    ['complete', 'complete']
"""

from __future__ import annotations

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

from colloc_kit import supervise
from colloc_kit.pipeline.cell import Placement
from colloc_kit.pipeline.cells import Cell, warm_order
from colloc_kit.pipeline.entry import CELL_ENDED, EXIT_CODES, RELEASE_KEPT
from colloc_kit.pipeline.executors.base import CellJob
from colloc_kit.pipeline.progress import GpuBoard
from colloc_kit.statuses import COMPLETE, DONE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, Status
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["LANE_ENTRY", "Dispatcher", "LaneCell", "dispatch_order"]

LANE_ENTRY = "colloc_kit.pipeline.entry"  # what each lane process runs (`python -m`)
STATUS_OF_CODE = {code: status for status, code in EXIT_CODES.items()}
POLL_S = 0.05
STOP_TIMEOUT_S = 120.0  # a cell's jobs stop within seconds; an MPS daemon's quit is bounded at about 30 s
KEPT_IDLE_S = 5.0  # an idle lane with no cell waiting keeps its launch this long (for a lone baseline's next repeat,
                   # queued once its experiment's cells are read back), then closes it (`Dispatcher.pump`)


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
    idle_since: float = field(default_factory=time.monotonic)  # when its last cell ended
    ended: "queue.Queue[tuple[str, int]]" = field(default_factory=queue.Queue)  # (cell id, code) per CELL_ENDED line
    released: threading.Event = field(default_factory=threading.Event)  # it closed its kept launch, as told

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


class LaneCell(CellJob):
    """The handle of a cell queued on a dispatcher's lanes: done once a lane said it ended; waiting drives the lanes."""

    def __init__(self, cell: Cell, dispatcher: "Dispatcher"):
        super().__init__(cell)
        self.dispatcher = dispatcher

    def done(self) -> bool:
        """Whether a lane said the cell ended (the lanes pumped first, unless it had: a closed dispatcher's handles
        read their ends without telling its lanes anything)."""
        if self.cell.cell_id not in self.dispatcher.codes:
            self.dispatcher.pump()
        return self.cell.cell_id in self.dispatcher.codes

    def result(self) -> Status | str:
        """The status the cell's run ended with, waiting for it (and driving the lanes) if need be."""
        while not self.done():
            time.sleep(POLL_S)
        return STATUS_OF_CODE.get(self.dispatcher.codes[self.cell.cell_id], RUN_ERROR)


class Dispatcher:
    """A lane per placement (GPU), started with its first cell, and the one queue of cells they take (module doc)."""

    def __init__(self, placements: list[Placement], shares: list[list[int] | None], board: GpuBoard):
        self.placements, self.shares, self.board = placements, shares, board
        self.labels = [f"GPU {p.gpu}" for p in placements]
        self.lanes: list[_LaneProcess | None] = [None] * len(placements)
        self.todo: list[tuple[Cell, dict]] = []
        self.codes: dict[str, int] = {}  # cell id -> the code its lane said it ended with
        self.spec_file: Path | None = None  # the latest experiment's: a lane started now imports its models
        self.folder: ExperimentFolder | None = None

    def add(self, cells: list[Cell], spec_file: Path, folder: ExperimentFolder, warm: bool,
            machine_file: Path) -> list[LaneCell]:
        """Queue `cells` of the experiment in `spec_file` (`warm`: each series' repeats together, else
        `dispatch_order`; `machine_file`: the machine as its folder stores it) behind those queued before; a handle
        per cell, in the order given."""
        self.spec_file, self.folder = spec_file, folder
        order = {"spec": str(spec_file), "out": str(folder.out), "machine_file": str(machine_file)}
        under_way = {cell.cell_id for cell, _ in self.todo} | {lane.cell.cell_id for lane in self.lanes
                                                              if lane is not None and lane.cell is not None}
        new = [cell for cell in (warm_order(cells) if warm else dispatch_order(cells)) if cell.cell_id not in under_way]
        for cell in new:
            self.codes.pop(cell.cell_id, None)  # run again: its earlier end is not this run's
        self.todo += [(cell, order) for cell in new]
        self.board.more_cells(len(new))
        return [LaneCell(cell, self) for cell in cells]

    def idle(self) -> bool:
        """Nothing queued, no lane running a cell."""
        return not self.todo and all(lane is None or lane.cell is None for lane in self.lanes)

    def pump(self) -> None:
        """Hear each lane; a lane that died is replaced while cells wait; each idle lane gets its next cell
        (`_next_for`), or where it has had none for KEPT_IDLE_S closes the launch it may keep (its jobs would train
        on, held, beside the other lanes' cells)."""
        for slot, lane in enumerate(self.lanes):
            if lane is not None and _heard(lane, self.codes, self.board) and self.todo:
                lane = None  # it died: a fresh one takes its place
            next_cell = None
            if (lane is None or lane.cell is None) and self.todo:
                lane = lane or self._start(slot)
                next_cell = _next_for(lane, [c for c, _ in self.todo], self.lanes)
            if lane is not None and next_cell is not None:
                cell, order = self.todo.pop(next_cell)
                lane.hand(cell, order)
                self.board.show(lane.label, f"{cell.label}: starting")
            elif (lane is not None and lane.cell is None and lane.last is not None
                  and time.monotonic() - lane.idle_since > KEPT_IDLE_S):
                lane.tell({RELEASE_KEPT: True})  # answered as `release_kept` answers it
                lane.last = None  # nothing kept: no series to keep to

    def wait(self, handles: list[LaneCell]) -> None:
        """Drive the lanes until every cell of `handles` has ended."""
        while not all(h.done() for h in handles):
            time.sleep(POLL_S)

    def release_kept(self) -> None:
        """Each lane closes the launch it keeps (`pipeline.warm`: its jobs stopped, its mode left), answered before
        STOP_TIMEOUT_S or by the lane's end; the GPUs are then free for another experiment's checks."""
        lanes = self._started()
        for lane in lanes:
            lane.released.clear()
            lane.tell({RELEASE_KEPT: True})
            lane.last = None  # nothing kept: no series to keep to
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for lane in lanes:
            while lane.proc.poll() is None and time.monotonic() < deadline and not lane.released.wait(POLL_S):
                pass

    def close(self) -> None:
        """Every cell done: end each lane's input, so that it leaves (its zygote with it); stop any that does not
        within STOP_TIMEOUT_S."""
        lanes = self._started()
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
        self.board.close()

    def stop(self) -> None:
        """Interrupt every lane once and wait for each to stop its jobs and restore its GPU; kill what is still
        there after STOP_TIMEOUT_S, or at once on a second interrupt."""
        lanes = self._started()
        for lane in lanes:
            self.board.show(lane.label, f"{lane.cell.label}: stopping" if lane.cell else "stopping")

        def killed(proc: supervise.Child) -> None:
            lane = next(r for r in lanes if r.proc is proc)
            self.board.write(f"{lane.label}: its lane did not stop in time; killed with its workers "
                             f"(its MPS watchdog quits the daemon); see {lane.log}")

        try:
            supervise.stop_all([lane.proc for lane in lanes], first=signal.SIGINT, grace_s=STOP_TIMEOUT_S,
                               on_kill=killed)
        finally:
            for lane in lanes:
                lane.pump.join(timeout=5)
                if lane.proc.stdin and not lane.proc.stdin.closed:
                    lane.proc.stdin.close()
            self.board.close()

    def _started(self) -> list[_LaneProcess]:
        return [lane for lane in self.lanes if lane is not None]

    def _start(self, slot: int) -> _LaneProcess:
        """The lane process of `slot`'s GPU, its stderr in the latest experiment's dispatch log."""
        assert self.spec_file is not None and self.folder is not None, "a lane starts for a cell that was added"
        placement, label, cores, board = self.placements[slot], self.labels[slot], self.shares[slot], self.board
        log, dispatcher = self.folder.dispatch_log("lane", placement.gpu), os.getpid()
        command = [sys.executable, "-m", LANE_ENTRY, str(self.spec_file), "--gpu", str(placement.gpu)]
        with open(log, "ab") as stderr:
            proc = subprocess.Popen(  # in a session of its own: a terminal's Ctrl-C reaches the dispatcher only,
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,  # which forwards one per lane
                start_new_session=True, preexec_fn=lambda: _child_setup(cores, dispatcher))
        ended: queue.Queue = queue.Queue()
        released = threading.Event()

        def heard(line: str) -> None:  # each line a lane prints is its state now, or the end of its cell
            if line.startswith(f"{CELL_ENDED} {RELEASE_KEPT} "):  # not a cell's end: its kept launch closed
                released.set()
            elif line.startswith(CELL_ENDED):
                _, cell_id, code = line.split()
                ended.put((cell_id, int(code)))
            elif line.strip():
                board.show(label, line.strip())

        assert proc.stdout is not None  # a pipe
        pump = supervise.pump_lines(proc.stdout, heard, name=f"lane-{label}")
        board.show(label, "starting its lane")
        self.lanes[slot] = lane = _LaneProcess(label, placement, proc, log, pump, ended=ended, released=released)
        return lane


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


def _next_for(lane: _LaneProcess, todo: list[Cell], lanes: list[_LaneProcess | None]) -> int | None:
    """Where in `todo` the idle `lane`'s next cell is: the next repeat of the series it ran last (its launch may be
    kept warm: `pipeline.warm`), else a twin that swaps its feed on that launch (`Cell.feed_from`), else the first
    cell of a series no other lane runs nor swaps from, else the first that is no other lane's twin (a repeat of
    another lane's series, started afresh: no lane idles while such cells wait); None where only the twins of the
    series other lanes ran last wait: each is swapped on its cell's launch there, never measured afresh here (a
    swap asked for, a fresh launch measured under the same cell id: two protocols in one series)."""
    others = {other.last.series for other in lanes if other not in (None, lane) and other.last is not None}
    last = lane.last.series if lane.last is not None else None
    mine = [i for i, cell in enumerate(todo) if last is not None and cell.series == last]
    twins = [i for i, cell in enumerate(todo) if last is not None and cell.feed_from == last]
    free = [i for i, cell in enumerate(todo) if cell.series not in others and cell.feed_from not in others]
    not_theirs = [i for i, cell in enumerate(todo) if cell.feed_from not in others]
    return next(iter(mine or twins or free or not_theirs), None)


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
    if status not in (COMPLETE, FAILED_JOBS, INTERRUPTED, DONE) and said:  # DONE: passed over, or another kit's
        board.write(f"{lane.label}: cell {lane.cell.label} ended with code {code}: {said} (all of it: {lane.log})")
    board.show(lane.label, f"{lane.cell.label} done" if status == COMPLETE else
               f"{lane.cell.label} {'failed jobs' if status == FAILED_JOBS else status}")
    lane.cell, lane.idle_since = None, time.monotonic()


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] if path.exists() else []
    return lines[-1] if lines else ""
