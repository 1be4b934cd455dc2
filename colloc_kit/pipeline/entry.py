"""The two ways a lane (lane.py) runs in a process of its own: a lane process of the GPU executor, one per GPU for
the whole experiment (or several: `executors.gpus.kept_lanes`), which runs the cells it is handed on stdin (`python -m
colloc_kit.pipeline.entry SPEC_FILE --gpu N`, a JSON line per cell), and a Slurm array task, which runs its share of
the cells (`run_cells_task`, which submitit pickles by reference).

The lane process's stdout is text: its progress, one line at a time, and after each cell one line
`<CELL_ENDED> <cell id> <code>` (the codes of `EXIT_CODES`). It leaves when its stdin ends, and stops its cell on
SIGINT (its dispatcher's interrupt) or SIGTERM, also where it inherited SIGINT ignored (a kit started in the
background of a script: shells start such commands with SIGINT ignored, and a child inherits that).

    >>> run_cells_task("runs/demo/specs/3f9a0c1d2e.json", ["naive-x2-r0-5e1b9c0a7d"], "runs")   # doctest: +SKIP
    {'naive-x2-r0-5e1b9c0a7d': 'complete'}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path

from colloc_kit import machine, supervise
from colloc_kit.pipeline.cell import Placement, current_slurm_job, preflight
from colloc_kit.pipeline.cells import Cell, cell_named, cells
from colloc_kit.pipeline.lane import Lane
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.warm import Kept
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import COMPLETE, DONE, FAILED_JOBS, INTERRUPTED, RUN_ERROR, Status
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.worker.zygote import Zygote

__all__ = ["CELL_ENDED", "EXIT_CODES", "RELEASE_KEPT", "lane_main", "run_cells_task"]

CELL_ENDED = "colloc-kit-cell-ended"  # the lane process's line after each cell: CELL_ENDED <cell id> <code>
RELEASE_KEPT = "release_kept"  # an order: close the lane's kept launch (pipeline.warm); answered CELL_ENDED <it> 0
EXIT_CODES = {COMPLETE: 0, FAILED_JOBS: 1, INTERRUPTED: 130, RUN_ERROR: 3,  # a cell's status as a code (a lane
              DONE: 4}  # process exits with the last one); DONE: left to another kit on the folder (store.claims)


def _spec_and_cells(spec_file: str | Path) -> tuple[ExperimentSpec, dict[str, Cell]]:
    spec = ExperimentSpec.from_mapping(json.loads(Path(spec_file).read_text()))
    return spec, {c.cell_id: c for c in cells(spec)}


def _cell(spec: ExperimentSpec, by_id: dict[str, Cell], cell_id: str) -> Cell:
    """The cell `cell_id` names: one of the spec's, or a later repeat (`cells.cell_named`), kept in `by_id`."""
    if cell_id not in by_id:
        by_id[cell_id] = cell_named(spec, cell_id)
    return by_id[cell_id]


def run_cells_task(spec_file: str, cell_ids: list[str], out: str) -> dict[str, Status]:
    """A Slurm array task: describe this node, run `cell_ids` as one lane on the GPU Slurm gave the task
    (`_visible_gpu`: NVML ignores CUDA_VISIBLE_DEVICES, so the kit finds that card's NVML index); returns each cell's
    status (run_error for one whose run raised; the error is in its manifest)."""
    spec, by_id = _spec_and_cells(spec_file)
    info = machine.describe()
    machine_file = ExperimentFolder.of(out, spec.name).write_machine(info, tag=current_slurm_job() or str(os.getpid()))
    gpu = _visible_gpu(info, spec.gpu) if spec.device == "cuda" else spec.gpu
    preflight(spec, gpus=[gpu])
    statuses: dict[str, Status] = {}
    with supervise.sigterm_as_interrupt(), Lane(spec, Placement.on(info, machine_file, gpu, spec.device), Path(out),
                                                Progress(total_runs=len(cell_ids), enabled=False)) as lane:
        for cell_id in cell_ids:
            try:
                started = lane.start(_cell(spec, by_id, cell_id))  # read back while the next cell starts
                if started is not None:  # None: left to another kit on the folder (said)
                    statuses[cell_id] = started[0]
            except Exception as exc:  # noqa: BLE001 - recorded in its manifest; the task's other cells run on
                print(f"colloc-kit: cell {_cell(spec, by_id, cell_id).label}: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
                statuses[cell_id] = RUN_ERROR
    return statuses


def _visible_gpu(machine_info: dict, default: int) -> int:
    """The NVML index of the task's GPU: Slurm's global GPU id (SLURM_STEP_GPUS / SLURM_JOB_GPUS, not renumbered by
    device cgroups), else the first of CUDA_VISIBLE_DEVICES (an index or a UUID), else `default`."""
    named = (os.environ.get("SLURM_STEP_GPUS") or os.environ.get("SLURM_JOB_GPUS")
             or os.environ.get("CUDA_VISIBLE_DEVICES") or "")
    first = named.split(",")[0].strip()
    if first.isdigit():
        return int(first)
    return next((g["index"] for g in machine_info["gpus"] if g["uuid"] == first), default)


def lane_main(argv: list[str] | None = None) -> int:
    """One GPU's lane in its own process: runs each cell read from stdin (a JSON line: spec file, out, machine file,
    cell id; the cells of several experiments where the dispatcher keeps its lanes; or RELEASE_KEPT: close the launch
    it keeps), its progress as text lines on stdout and a CELL_ENDED line after each; exits when stdin ends (0), or
    130 on an interrupt. Its zygote, started
    for the first spec's models, serves every experiment the lane runs."""
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=lane_main.__doc__)
    parser.add_argument("spec_file", help="the first experiment's spec: its models say what the zygote imports")
    parser.add_argument("--gpu", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the dispatcher's interrupt, whatever was inherited
    bar = Progress(total_runs=1, report=_say)
    lanes: dict[tuple[str, str, str], tuple[Lane, dict[str, Cell]]] = {}
    try:
        with supervise.sigterm_as_interrupt(), contextlib.ExitStack() as stack:
            zygote = stack.enter_context(Zygote.for_experiment(_spec_and_cells(args.spec_file)[0].jobs))
            kept = Kept()  # the GPU's kept launch (pipeline.warm), whichever experiment's lane ran it
            stack.callback(kept.close)
            for line in sys.stdin:
                order = json.loads(line)
                if order.get(RELEASE_KEPT):  # its experiment is done: the GPU free for the next one's checks
                    kept.close()
                    _say(f"{CELL_ENDED} {RELEASE_KEPT} 0")
                    continue
                key = (order["spec"], order["out"], order["machine_file"])
                if key not in lanes:
                    spec, by_id = _spec_and_cells(order["spec"])
                    placement = Placement.on(json.loads(Path(key[2]).read_text()), Path(key[2]), args.gpu,
                                             spec.device)
                    lanes[key] = (stack.enter_context(Lane(spec, placement, Path(key[1]), bar, zygote, kept)), by_id)
                lane, by_id = lanes[key]
                _say(f"{CELL_ENDED} {order['cell']} {_run_one(lane, _cell(lane.spec, by_id, order['cell']), args.gpu)}")
    except KeyboardInterrupt:
        return EXIT_CODES[INTERRUPTED]
    return 0


_SAYING = threading.Lock()


def _say(line: str) -> None:
    """One whole line on stdout: the progress (said by the lane's read-back thread too) never splits a CELL_ENDED
    line, which the dispatcher must read at a line's start."""
    with _SAYING:
        sys.stdout.write(f"{line}\n")
        sys.stdout.flush()


def _run_one(lane: Lane, cell: Cell, gpu: int) -> int:
    """Run `cell` on `lane` (read back while the next one starts); its code (`EXIT_CODES`)."""
    try:
        started = lane.start(cell)  # None: left to another kit on the folder (said)
        status = started[0] if started is not None else DONE
    except Exception as exc:  # noqa: BLE001 - recorded in its manifest; the lane's next cells run on
        print(f"colloc-kit: cell {cell.label} on GPU {gpu}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        status = RUN_ERROR
    return EXIT_CODES.get(status, EXIT_CODES[RUN_ERROR])


if __name__ == "__main__":
    sys.exit(lane_main())
