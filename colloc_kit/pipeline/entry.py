"""The two ways a cell runs in a process of its own, both through `report.run_reported` as on one GPU: a cell
process of the GPU executor (`python -m colloc_kit.pipeline.entry SPEC_FILE CELL_ID OUT --gpu N --machine-file F`),
and a Slurm array task (`run_cell_task`, which submitit pickles by reference).

    >>> run_cell_task("runs/demo/specs/3f9a0c1d2e.json", "naive-x2-r0-5e1b9c0a7d", "runs")   # doctest: +SKIP
    'complete'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .. import machine, supervise
from ..progress import Progress
from ..spec import ExperimentSpec
from ..statuses import COMPLETE, Status
from .cell import Placement, current_slurm_job, preflight
from .cells import Cell, cells
from .folder import ExperimentFolder
from .report import run_reported

__all__ = ["EXIT_ERROR", "cell_main", "run_cell_task"]

EXIT_ERROR = 3  # a cell process whose run raised (the error is in its manifest and on its stderr)


def _spec_and_cell(spec_file: str | Path, cell_id: str) -> tuple[ExperimentSpec, Cell]:
    spec = ExperimentSpec.from_mapping(json.loads(Path(spec_file).read_text()))
    return spec, next(c for c in cells(spec) if c.cell_id == cell_id)


def run_cell_task(spec_file: str, cell_id: str, out: str) -> Status:
    """A Slurm array task: describe this node, run one cell on the GPU Slurm gave the task (`_visible_gpu`: NVML
    ignores CUDA_VISIBLE_DEVICES, so the kit finds that card's NVML index); returns the run's status."""
    spec, cell = _spec_and_cell(spec_file, cell_id)
    info = machine.describe()
    machine_file = ExperimentFolder.of(out, spec.name).write_machine(info, tag=current_slurm_job() or str(os.getpid()))
    gpu = _visible_gpu(info, spec.gpu) if spec.device == "cuda" else spec.gpu
    preflight(spec, gpus=[gpu])
    with supervise.sigterm_as_interrupt():
        reading = run_reported(spec, cell, Placement.on(info, machine_file, gpu, spec.device), Path(out),
                               Progress(total_runs=1, enabled=False))
    return Status(reading.summary["status"])


def _visible_gpu(machine_info: dict, default: int) -> int:
    """The NVML index of the task's GPU: Slurm's global GPU id (SLURM_STEP_GPUS / SLURM_JOB_GPUS, not renumbered by
    device cgroups), else the first of CUDA_VISIBLE_DEVICES (an index or a UUID), else `default`."""
    named = (os.environ.get("SLURM_STEP_GPUS") or os.environ.get("SLURM_JOB_GPUS")
             or os.environ.get("CUDA_VISIBLE_DEVICES") or "")
    first = named.split(",")[0].strip()
    if first.isdigit():
        return int(first)
    return next((g["index"] for g in machine_info["gpus"] if g["uuid"] == first), default)


def cell_main(argv: list[str] | None = None) -> int:
    """One cell in its own process, its progress as text lines on stdout (the GPU executor's line for its GPU).
    Exit 0 complete, 1 failed jobs, 130 interrupted, 3 an error (on stderr and in the manifest)."""
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=cell_main.__doc__)
    parser.add_argument("spec_file")
    parser.add_argument("cell_id")
    parser.add_argument("out")
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--machine-file", required=True)
    args = parser.parse_args(argv)
    spec, cell = _spec_and_cell(args.spec_file, args.cell_id)
    placement = Placement.on(json.loads(Path(args.machine_file).read_text()), Path(args.machine_file), args.gpu,
                             spec.device)
    bar = Progress(total_runs=1, report=lambda text: print(text, flush=True))
    try:
        with supervise.sigterm_as_interrupt():
            status = run_reported(spec, cell, placement, Path(args.out), bar).summary["status"]
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        print(f"colloc-kit: cell {cell.label} on GPU {args.gpu}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return 0 if status == COMPLETE else 1


if __name__ == "__main__":
    sys.exit(cell_main())
