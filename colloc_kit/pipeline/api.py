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

import dataclasses
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from colloc_kit import supervise
from colloc_kit.analysis.results import Results, RunReading, assemble, combine, read_run
from colloc_kit.errors import BrokenRun
from colloc_kit.pipeline.cells import Cell, Plan, cells
from colloc_kit.pipeline.estimate import lanes_of
from colloc_kit.pipeline.executors import Executor, chosen
from colloc_kit.pipeline.precision import more_repeats
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.tally import Tally
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.tracking.log import log_experiment, warn_unreachable

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
    return combine([run_spec(spec, **running) for spec in specs])


def run_spec(spec: ExperimentSpec, out: str | Path = "runs", progress: bool | Progress = True,
             executor: str | Executor | None = None, again: bool = False, tally: Tally | None = None) -> Results:
    """Run every cell of `spec` not yet complete under out/<name>/ (saying which were reused, on stdout, and which
    skipped) and return the results of all its cells; an interrupt stops at once, keeping what was measured.
    `again=True`: every cell is measured as a new repeat, complete ones included. `executor`: where the cells run (a
    registered name or an Executor; default: by the spec, see executors/). With Slurm the missing cells are
    submitted and the results of those already complete returned. `tally`: one command's several calls (the seed
    study's experiments) counted in it, to be said once at the end, instead of a notice for each call."""
    folder = ExperimentFolder.writable(out, spec.name)
    if not isinstance(executor, Executor):
        kind, options = chosen(spec, executor)
        executor = kind(spec, folder, options, progress=progress)
    executor.check()
    if spec.mlflow:
        warn_unreachable(spec.mlflow)  # MLflow not installed: refused; a server not answering: a warning
    plan = Plan.of(spec, folder, executor.in_flight())
    plan = _new_repeats(spec, plan, folder) if again else plan
    if tally is None:
        say_reused(plan.done, folder)
    else:
        tally.add([], _start_times(folder, plan.done))
    dataclasses.replace(plan, done=[]).say_skipped(folder)
    with supervise.sigterm_as_interrupt():
        handles = executor.submit(plan.todo)
        lanes = lanes_of(spec) if spec.baseline_precision else 1
        while not spec.slurm and all(h.result() for h in handles) and (more := more_repeats(spec, folder, lanes)):
            handles += executor.submit(more)  # baselines short of their precision target: one more lone run each
            plan = dataclasses.replace(plan, all=plan.all + more)
    if tally is not None:
        tally.add([h.cell.cell_id for h in handles], {})
    readings = {h.cell.cell_id: reading for h in handles if (reading := h.reading()) is not None}
    results = _results(plan, readings, folder)
    if spec.mlflow and len(results.runs):
        log_experiment(spec.mlflow, results, str(folder.path))  # cells not yet logged, figures they lacked
    return results


def _new_repeats(spec: ExperimentSpec, plan: Plan, folder: ExperimentFolder) -> Plan:
    """`plan` with each complete cell replaced by the next repeat of it that the folder has no run of."""
    taken = set(folder.cell_states()) | {c.cell_id for c in plan.running + plan.queued}
    wider = cells(dataclasses.replace(spec, repeats=spec.repeats + len(taken)))  # room for every repeat so far
    fresh: list[Cell] = []
    for cell in plan.done:
        fresh.append(next(c for c in wider if c.mode == cell.mode and c.copies == cell.copies and c.jobs == cell.jobs
                          and c.cell_id not in taken and c not in fresh))
    every = [c for c in wider if c.cell_id in taken or c in fresh or c in plan.all]  # earlier repeats' results too
    return Plan(every, [*plan.todo, *fresh], [], plan.running, plan.queued)


def say_reused(done: list[Cell], folder: ExperimentFolder) -> None:
    """One plain line (stdout: a notice, not an error) naming the complete cells reused, with the time of the
    latest run among them, and how to measure them again.

    >>> import tempfile
    >>> say_reused([], ExperimentFolder.of(tempfile.mkdtemp(), "x"))   # nothing reused: nothing said
    """
    if not done:
        return
    started = list(_start_times(folder, done).values())
    when = time.strftime("%H:%M", time.localtime(max(s for s in started if s is not None))) if any(started) else "?"
    print(f"colloc-kit: reused the run of {when} (nothing measured): {len(done)} cell(s) already complete in "
          f"{folder.path} ({', '.join(c.label for c in done)}). To measure again: FRESH = True in a notebook's "
          "parameters, again=True in colloc_kit.run, or the panel's Run.")


def _start_times(folder: ExperimentFolder, done: list[Cell]) -> dict[str, float | None]:
    """When the complete run of each cell of `done` in `folder` started (Unix time), where its manifest says."""
    states = folder.cell_states()
    return {c.cell_id: states[c.cell_id].run.read_manifest().started_at if c.cell_id in states else None
            for c in done}


def _results(plan: Plan, readings: dict[str, RunReading], folder: ExperimentFolder) -> Results:
    """The results of every cell that has a run, in cell order: read as it ended here, else from its folder (a run
    that cannot be read is named in `.broken`, as `load()` does)."""
    states = folder.cell_states()
    found, broken = [], {}
    for cell in plan.all:
        if cell.cell_id in readings:
            found.append(readings[cell.cell_id])
        elif cell.cell_id in states:
            try:
                found.append(read_run(states[cell.cell_id].run))
            except (OSError, ValueError, BrokenRun) as exc:  # ValueError: JSON, Unicode and Parquet errors
                broken[str(states[cell.cell_id].run.path)] = f"{type(exc).__name__}: {exc}"
    results = assemble(found)
    results.broken = broken
    return results
