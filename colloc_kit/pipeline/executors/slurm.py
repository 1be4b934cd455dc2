"""The Slurm executor: an experiment's cells submitted through submitit as one job array, each task on a GPU of its
own running `cells_per_task` cells (default 1) as one lane: one process whose jobs fork from one zygote, so torch's
imports and cuDNN's libraries load once per task.

An optional extra: `pip install 'colloc-kit[slurm]'`. Each task runs `entry.run_cells_task` (the same lane as a
local GPU runs) with the interpreter that submitted it, so the kit must be installed where the nodes see it, and `--out`
must be a folder the nodes share. The submitting process may exit; rerunning the same command submits only the cells
neither complete in the folder nor queued or running in Slurm; `colloc-kit status DIR` tells which.

    >>> colloc_kit.run([{"model": "resnet50", "steps": 300}], mode=["naive", "mps"], copies=[1, 2, 4],
    ...                slurm={"partition": "gpu", "time_min": 30}, out="/shared/runs")      # doctest: +SKIP

Its options (YAML `slurm:`, or the CLI's `--slurm --partition P --time-min M ...`) are `SlurmOptions`' fields.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colloc_kit.errors import BadInput
from colloc_kit.pipeline.cell import preflight
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.entry import run_cells_task
from colloc_kit.pipeline.executors.base import CellJob, Executor
from colloc_kit.statuses import Status

__all__ = ["SlurmExecutor", "SlurmOptions", "queue_states"]


@dataclass(frozen=True)
class SlurmOptions:
    """What each array task asks Slurm for (None: the cluster's default); each field is also a CLI flag."""

    partition: str | None = field(default=None, metadata={"help": "the Slurm partition"})
    time_min: int = field(default=60, metadata={"help": "the time limit of each task in minutes"})
    gpus_per_task: int = field(default=1, metadata={
        "help": "GPUs per task; a GPU Slurm allocates is the task's alone, unless the cluster shares GPUs "
                "through `shard` or `mps` gres"})
    array_parallelism: int | None = field(default=None, metadata={"help": "at most this many tasks at once"})
    cpus_per_task: int | None = field(default=None, metadata={
        "help": "CPU cores per task (give enough for the jobs' loader workers)"})
    cells_per_task: int = field(default=1, metadata={
        "help": "cells each task runs one after another through one preloaded process (imports paid once per "
                "task); time_min is per task, so raise it with this"})

    @classmethod
    def flags(cls) -> list[dataclasses.Field]:
        """The fields, in order: the CLI makes one flag of each (`--time-min`, ...)."""
        return list(dataclasses.fields(cls))


class SlurmJob(CellJob):
    """A cell in a Slurm array task (a submitit job that runs it, maybe with other cells)."""

    def __init__(self, cell: Cell, job: Any) -> None:  # a submitit Job
        super().__init__(cell)
        self.job = job

    def done(self) -> bool:
        """Whether the Slurm task has ended."""
        return self.job.done()

    def result(self) -> Status | str:
        """The cell run's status as the task returned it (waits for the task)."""
        return self.job.result()[self.cell.cell_id]

    def cancel(self) -> None:
        """scancel the task (with the task's other cells)."""
        self.job.cancel()


class SlurmExecutor(Executor):
    """Submits the cells to Slurm (see the module)."""

    name = "slurm"
    Options = SlurmOptions

    def check(self) -> None:
        """The jobs are checked here; the modes on the node that runs them. Refuses where submitit or sbatch lack."""
        preflight(self.spec, modes=False)
        try:
            import submitit  # noqa: F401, PLC0415 - an optional extra
        except ImportError:
            raise BadInput("--slurm needs submitit, an optional extra: pip install 'colloc-kit[slurm]' "
                           "(or pip install submitit)") from None
        if shutil.which("sbatch") is None:
            raise BadInput("--slurm submits with sbatch, which is not on this machine's PATH; run on a Slurm login "
                           "node, or leave --slurm out (--gpus spreads the cells over this machine's GPUs)")

    def in_flight(self) -> set[str]:
        """The cells whose Slurm task is still queued or running."""
        ids = self.folder.submitted()
        states = queue_states(list(ids.values()))
        return {cell for cell, job in ids.items() if job in states}

    def _submit(self, cells: list[Cell], spec_file: Path) -> list[CellJob]:
        import submitit  # noqa: PLC0415 - an optional extra, checked by `check`

        if not cells:
            print(f"colloc-kit: nothing to submit; every cell is complete or in Slurm (colloc-kit status "
                  f"{self.folder.path})", file=sys.stderr)
            return []
        executor = submitit.AutoExecutor(folder=self.folder.slurm_dir.absolute() / "%j", cluster="slurm")
        executor.update_parameters(**self._parameters())
        assert isinstance(self.options, SlurmOptions)
        per_task = self.options.cells_per_task
        tasks = [cells[i:i + per_task] for i in range(0, len(cells), per_task)]
        n, out = len(tasks), str(self.folder.out.absolute())
        jobs = executor.map_array(run_cells_task, [str(spec_file.absolute())] * n,
                                  [[c.cell_id for c in task] for task in tasks], [out] * n)
        by_cell = [(cell, job) for task, job in zip(tasks, jobs) for cell in task]
        self.folder.record_submitted({cell.cell_id: job.job_id for cell, job in by_cell})
        print(f"colloc-kit: submitted {len(cells)} cell(s) to Slurm as {n} task(s) of job array "
              f"{jobs[0].job_id.split('_')[0]}; follow them with `colloc-kit status {self.folder.path}`",
              file=sys.stderr)
        return [SlurmJob(cell, job) for cell, job in by_cell]

    def _parameters(self) -> dict:
        """submitit's parameters for the options."""
        options = self.options
        assert isinstance(options, SlurmOptions)
        parameters = {"name": f"colloc-{self.spec.name}", "timeout_min": options.time_min, "tasks_per_node": 1,
                      "nodes": 1}
        for option, parameter in (("partition", "slurm_partition"), ("array_parallelism", "slurm_array_parallelism"),
                                  ("cpus_per_task", "cpus_per_task")):
            if getattr(options, option) is not None:
                parameters[parameter] = getattr(options, option)
        if self.spec.device == "cuda":
            parameters["slurm_gpus_per_task"] = options.gpus_per_task
        return parameters


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
