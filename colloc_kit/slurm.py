"""Submit an experiment's cells to Slurm through submitit: one array task per cell, each on a GPU of its own.

An optional extra: `pip install 'colloc-kit[slurm]'`. Each task runs `experiment.run_cell_task` (the same code as
a local cell) with the interpreter that submitted it, so the kit must be installed where the nodes see it, and
`--out` must be a folder the nodes share. The submitting process may exit; rerunning the same command submits
only the cells neither complete in the folder nor queued or running in Slurm; `colloc-kit status DIR` tells which.

    >>> colloc_kit.run([{"model": "resnet50", "steps": 300}], mode=["naive", "mps"], copies=[1, 2, 4],
    ...                slurm={"partition": "gpu", "time_min": 30}, out="/shared/runs")      # doctest: +SKIP

Options (YAML `slurm:`, or the CLI's `--slurm --partition P --time-min M ...`):

- `partition`: the Slurm partition (default: the cluster's default partition).
- `time_min`: the time limit of each task in minutes (default 60).
- `gpus_per_task`: GPUs requested per task (default 1). A GPU that Slurm allocates (gres) is the task's alone: Slurm
  gives no other job a GPU it allocated, unless the cluster shares GPUs through `shard` or `mps` gres.
- `array_parallelism`: at most this many tasks at once (default: as many as Slurm allows).
- `cpus_per_task`: CPU cores per task (default: the cluster's; give enough for the jobs' loader workers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import BadInput

if TYPE_CHECKING:
    from .cells import Cell
    from .spec import ExperimentSpec

OPTIONS = {"partition": str, "time_min": int, "gpus_per_task": int, "array_parallelism": int, "cpus_per_task": int}
DEFAULT_TIME_MIN = 60
SUBMITTED = "submitted.json"  # {cell_id: slurm job id}, under <experiment>/slurm/


def validate_options(options: object) -> None:
    """Refuse unknown or ill-typed Slurm options (before anything is submitted)."""
    if not isinstance(options, dict):
        raise BadInput(f"slurm: give a mapping of options such as {{partition: gpu, time_min: 30}}, got {options!r}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise BadInput(f"slurm: unknown option(s) {', '.join(unknown)}; valid options: {', '.join(OPTIONS)}")
    for key, value in options.items():
        if value is None:
            continue
        kind = OPTIONS[key]
        if kind is int and not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise BadInput(f"slurm: {key} must be a positive whole number, got {value!r}")
        if kind is str and not (isinstance(value, str) and value):
            raise BadInput(f"slurm: {key} must be a name, got {value!r}")


def require_submitter() -> None:
    """Refuse (BadInput) where submitit is not installed or this machine has no `sbatch`."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise BadInput("--slurm needs submitit, an optional extra: pip install 'colloc-kit[slurm]' "
                       "(or pip install submitit)") from None
    if shutil.which("sbatch") is None:
        raise BadInput("--slurm submits with sbatch, which is not on this machine's PATH; run on a Slurm login node, "
                       "or leave --slurm out (--gpus spreads the cells over this machine's GPUs)")


def submit(spec: "ExperimentSpec", spec_file: Path, todo: list["Cell"], exp_dir: Path) -> dict[str, str]:
    """Submit one array task per cell of `todo` with submitit's map_array; returns {cell_id: job id}, also recorded
    in <experiment>/slurm/submitted.json."""
    import submitit

    from .experiment import run_cell_task

    if not todo:
        print(f"colloc-kit: nothing to submit; every cell is complete or in Slurm (colloc-kit status {exp_dir})",
              file=sys.stderr)
        return {}
    options = {k: v for k, v in spec.slurm.items() if v is not None}
    executor = submitit.AutoExecutor(folder=exp_dir.absolute() / "slurm" / "%j", cluster="slurm")
    parameters = {"name": f"colloc-{spec.name}", "timeout_min": options.get("time_min", DEFAULT_TIME_MIN),
                  "tasks_per_node": 1, "nodes": 1}
    if "partition" in options:
        parameters["slurm_partition"] = options["partition"]
    if "array_parallelism" in options:
        parameters["slurm_array_parallelism"] = options["array_parallelism"]
    if "cpus_per_task" in options:
        parameters["cpus_per_task"] = options["cpus_per_task"]
    if spec.device == "cuda":
        parameters["slurm_gpus_per_task"] = options.get("gpus_per_task", 1)
    executor.update_parameters(**parameters)
    n = len(todo)
    out = str(exp_dir.parent.absolute())
    jobs = executor.map_array(run_cell_task, [str(spec_file.absolute())] * n, [c.cell_id for c in todo], [out] * n)
    ids = {cell.cell_id: job.job_id for cell, job in zip(todo, jobs)}
    record = {**submitted(exp_dir), **ids}
    path = exp_dir / "slurm" / SUBMITTED
    tmp = path.with_name(f".{SUBMITTED}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2))
    os.replace(tmp, path)
    print(f"colloc-kit: submitted {n} cell(s) to Slurm as job array {jobs[0].job_id.split('_')[0]}; "
          f"follow them with `colloc-kit status {exp_dir}`", file=sys.stderr)
    return ids


def submitted(exp_dir: Path) -> dict[str, str]:
    """{cell_id: Slurm job id} of every cell ever submitted from this experiment folder."""
    path = Path(exp_dir) / "slurm" / SUBMITTED
    return json.loads(path.read_text()) if path.exists() else {}


def queue_states(job_ids: list[str]) -> dict[str, str]:
    """{job id: Slurm state} of those `job_ids` still in the queue (PENDING, RUNNING, ...); finished ones are absent.
    Empty where squeue is missing or does not answer."""
    if not job_ids or shutil.which("squeue") is None:
        return {}
    try:
        listing = subprocess.run(["squeue", "--noheader", "--array", "--format=%i %T"], capture_output=True,
                                 text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    wanted = set(job_ids)
    return {job: state for job, state in (line.split() for line in listing.splitlines() if len(line.split()) == 2)
            if job in wanted}


def queued_cells(exp_dir: Path) -> set[str]:
    """The cells whose Slurm task is still queued or running."""
    ids = submitted(exp_dir)
    states = queue_states(list(ids.values()))
    return {cell for cell, job in ids.items() if job in states}
