"""Run an experiment: the public calls notebooks and the CLI use (`colloc_kit.run`, `run_spec`, `sweep`).

    >>> import colloc_kit
    >>> results = colloc_kit.run([{"model": "smallcnn", "device": "cpu", "steps": 40}],
    ...                          mode="naive", copies=2, out="runs")          # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s"]]                        # doctest: +SKIP

Everything is validated before anything starts (jobs, datasets, modes, copy counts, GPUs, the executor's options);
each run's directory is written before its first job starts and completed on every exit path (rundir.py). The
experiment folder `out/<name>/` knows its cells: the same command into the same folder runs only the cells not
complete there, so a long matrix resumes across sessions, and says so on stdout ("reused the run of 22:41 (nothing
measured)"); `again=True` measures a new repeat of every cell instead. Where cells run is an executor's business
(executors/).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from colloc_kit import supervise
from colloc_kit.analysis.results import Results, combine
from colloc_kit.pipeline.executors import Executor
from colloc_kit.pipeline.executors.dispatcher import POLL_S
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.spec_run import SpecRun, executor_for
from colloc_kit.pipeline.tally import Tally
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec

__all__ = ["run", "run_spec", "sweep", "experiment_spec"]


def run(jobs: Iterable[JobSpec | Mapping[str, Any]], mode: Any = "naive", copies: int | list[int] = 1,
        repeats: int = 1, out: str | Path = "runs", name: str = "experiment", gpu: int = 0,
        gpus: list[int] | str | None = None, slurm: dict | None = None,
        time_limit_s: float | None = None, monitor: bool = True, monitor_interval_s: float = 0.15,
        placement: str = "pinned", progress: bool | Progress = True, mlflow: str | None = None,
        again: bool = False, warm_repeats: bool = False) -> Results:
    """Run job groups under one or more modes (`mode` may be a list) at one or more copy counts; return the results.

    `jobs` are JobSpec or dicts of JobSpec fields; `mode` is a name ("naive"), a dict ({"name": "mps",
    "thread_percentage": 50}) or a ModeSpec. `gpus=[0, 1]` (or "all") spreads the cells over those GPUs;
    `slurm={"partition": "gpu"}` submits them to Slurm instead (executors/slurm.py). `placement`: "pinned" (each job
    its own block of the host's cores) or "unpinned" (as the OS schedules them, as the seed study ran).
    `mlflow="http://host:5000"` also logs each cell to that MLflow tracking server as it completes (mlflow_log.py; one
    it cannot reach is a warning: the runs go on, in their folders). `again=True`: cells already complete in the
    folder are measured once more, as new repeats (the results hold old and new), instead of reused.
    `warm_repeats=True`: each cell's repeats are consecutive windows of one launch of its jobs (pipeline/warm.py).
    """
    spec = experiment_spec(jobs, mode, copies, repeats=repeats, name=name, gpu=gpu, gpus=gpus, slurm=slurm,
                           time_limit_s=time_limit_s, monitor=monitor, monitor_interval_s=monitor_interval_s,
                           placement=placement, mlflow=mlflow, warm_repeats=warm_repeats)
    return run_spec(spec, out=out, progress=progress, again=again)


def experiment_spec(jobs: Iterable[JobSpec | Mapping[str, Any]], mode: Any = "naive", copies: int | list[int] = 1,
                    **fields: Any) -> ExperimentSpec:
    """The ExperimentSpec `run` runs, checked (BadInput on a bad field): `fields` are ExperimentSpec's (repeats, name,
    gpu, gpus, slurm, time_limit_s, monitor, monitor_interval_s, placement, mlflow)."""
    modes = mode if isinstance(mode, list) else [mode]
    return ExperimentSpec(jobs=[j if isinstance(j, JobSpec) else JobSpec.from_mapping(j) for j in jobs],
                          modes=[ModeSpec.parse(m) for m in modes],
                          copies=copies if isinstance(copies, list) else [copies], **fields)


def sweep(jobs: Iterable[JobSpec | Mapping[str, Any]], modes: Iterable[Any], copies: int | list[int] = 1,
          baseline: Any = "exclusive", separately: bool = True, **options: Any) -> Results:
    """The notebooks' pattern in one call: each job group alone under `baseline` (one copy), then under every mode
    at its copy counts, all in one experiment folder; one Results of all of it, baselines included, ready for
    `analysis.summarize`.

    `modes`: names, dicts or ModeSpecs as `run` takes them; a pair (mode, copies) gives a mode its own copy counts
    (an MPS partition layout of three: 3). `separately` (the default) measures each job group on its own, N copies
    of one model at a time against its own baseline; False runs the groups together (a mixed workload).
    `baseline=None` runs no baseline. `options`: the rest of `run`'s arguments (repeats, out, name, time_limit_s, ...).
    On one GPU (or the CPU) the calls' jobs are forked from one zygote (`lane.shared_zygote`).

    >>> results = sweep([{"model": "resnet18"}, {"model": "resnet50"}], ["naive", ({"name": "mps",  # doctest: +SKIP
    ...                 "partitions": ["3g", "3g"]}, 2)], copies=[1, 2, 4], out="runs", name="study")
    >>> analysis.summarize(results)[["mode_label", "copies", "normalized_throughput_mean"]]     # doctest: +SKIP
    """
    groups = [[job] for job in jobs] if separately else [list(jobs)]
    shared = [m for m in modes if not isinstance(m, tuple)]  # one run call: their repeats interleave (A B A B)
    own = [m for m in modes if isinstance(m, tuple)]
    calls: list[tuple[list[JobSpec | Mapping[str, Any]], Any, int | list[int]]] = []  # (jobs, mode, copies)
    for group in groups:
        calls += [(group, baseline, 1)] if baseline is not None else []
        calls += [(group, shared, copies)] if shared else []
        calls += [(group, mode, counts) for mode, counts in own]
    running = {key: options.pop(key) for key in ("out", "progress", "again") if key in options}
    specs = [experiment_spec(group, mode, counts, **options) for group, mode, counts in calls]  # all checked first
    with shared_zygote():  # one after another on one GPU: torch imported once for all of them
        return combine([run_spec(spec, **running) for spec in specs])


def run_spec(spec: ExperimentSpec, out: str | Path = "runs", progress: bool | Progress = True,
             executor: str | Executor | None = None, again: bool = False, tally: Tally | None = None) -> Results:
    """Run every cell of `spec` not yet complete under out/<name>/ (saying which were reused, on stdout, and which
    skipped) and return the results of all its cells; an interrupt stops at once, keeping what was measured.
    `again=True`: every cell is measured as a new repeat, complete ones included. `executor`: where the cells run (a
    registered name or an Executor; default: by the spec, see executors/). With Slurm the missing cells are
    submitted and the results of those already complete returned. `tally`: one command's several calls (the seed
    study's experiments) counted in it, to be said once at the end, instead of a notice for each call."""
    run = SpecRun(spec, executor_for(spec, out, executor, progress), again, tally)
    with supervise.sigterm_as_interrupt(), shared_zygote():  # each round of repeats forked from one zygote
        run.start()
        while not run.advance():
            time.sleep(POLL_S)
    return run.results()
