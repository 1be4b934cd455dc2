"""One experiment's cells under way: planned from its folder, submitted with the repeats a baseline or a collocated
cell may need for its precision target (precision.py: each run only while its series is still short), then read back.
`api.run_spec` runs one and waits; the seed study runs several at once over kept lanes (`experiments.seed_run`), so
that no lane waits at an experiment's end.

    >>> from colloc_kit.spec import ExperimentSpec, JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=20)])
    >>> run = SpecRun(spec, executor_for(spec, "runs"))         # doctest: +SKIP
    >>> run.start()                                              # doctest: +SKIP
    >>> while not run.advance(): time.sleep(0.05)                # doctest: +SKIP
    >>> run.results().jobs[["job", "status"]]                    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from colloc_kit.analysis.results import Results, RunReading, assemble, read_run
from colloc_kit.errors import BrokenRun
from colloc_kit.gpu.mps_detect import one_scan
from colloc_kit.pipeline.cells import Cell, Plan, cells
from colloc_kit.pipeline.executors import Executor, chosen
from colloc_kit.pipeline.executors.base import CellJob
from colloc_kit.pipeline.precision import most_repeats, precision_repeats, target
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.tally import Tally
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import DONE
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.tracking.log import log_experiment, warn_unreachable

__all__ = ["SpecRun", "executor_for", "say_reused"]


def executor_for(spec: ExperimentSpec, out: str | Path, executor: str | Executor | None = None,
                 progress: bool | Progress = True) -> Executor:
    """The executor that runs `spec`'s cells under out/<name>/ (a registered name or an Executor; default: by the
    spec, see executors/), its checks passed (BadInput otherwise: nothing has started)."""
    if not isinstance(executor, Executor):
        kind, options = chosen(spec, executor)
        executor = kind(spec, ExperimentFolder.writable(out, spec.name), options, progress=progress)
    with one_scan():  # the machine's description and every mode's check read its MPS daemons once
        executor.check()
    if spec.mlflow:
        warn_unreachable(spec.mlflow)  # MLflow not installed: refused; a server not answering: a warning
    return executor


class SpecRun:
    """The cells of `spec` not yet complete in its executor's folder, run (`start`, then `advance` until it says
    done) and read back with those complete before (`results`). `again=True`: every cell measured as a new repeat;
    `tally`: several experiments of one command counted together, said once at the end, instead of a notice each."""

    def __init__(self, spec: ExperimentSpec, executor: Executor, again: bool = False, tally: Tally | None = None):
        self.spec, self.executor, self.folder, self.tally = spec, executor, executor.folder, tally
        plan = Plan.of(spec, self.folder, executor.in_flight())
        plan = _new_repeats(spec, plan, self.folder) if again else plan
        more = [] if again else precision_repeats(spec, plan)
        self.plan = dataclasses.replace(plan, all=plan.all + more, todo=plan.todo + more)
        if tally is None:
            say_reused(self.plan.done, self.folder)
        else:
            tally.add([], _start_times(self.folder, self.plan.done))
        dataclasses.replace(self.plan, done=[]).say_skipped(self.folder)
        self.handles: list[CellJob] = []

    def start(self) -> None:
        """Submit the cells to run (an executor of this host may run them before it returns)."""
        self.handles = self.executor.submit(self.plan.todo)

    def advance(self) -> bool:
        """Whether the experiment is done: False while a cell runs (cells queued in Slurm are not waited for)."""
        if self.spec.slurm:
            return True
        if not all(handle.done() for handle in self.handles):
            return False
        self.executor.settle()
        return True

    def results(self) -> Results:
        """The results of every cell that has a run, in cell order (logged to MLflow where the spec says), once
        counted in the tally: `count`, then `read`."""
        self.count()
        return self.read()

    def count(self) -> None:
        """The cells this run measured (not those passed over or left to another kit), into the tally if it has one:
        a later experiment of the command asks it which of its complete cells this command measured."""
        if self.tally is not None:
            self.tally.add([h.cell.cell_id for h in self.handles if not (h.done() and h.result() == DONE)], {})

    def read(self) -> Results:
        """The results of every cell that has a run, in cell order (logged to MLflow where the spec says): files
        read, the lanes not touched, so another thread may read while this one drives them (`experiments.seed_run`)."""
        readings = {h.cell.cell_id: reading for h in self.handles if (reading := h.reading()) is not None}
        results = _results(self.plan, readings, self.folder)
        if self.spec.mlflow and len(results.runs):
            log_experiment(self.spec.mlflow, results, str(self.folder.path))  # cells not logged, figures they lacked
        return results


def _new_repeats(spec: ExperimentSpec, plan: Plan, folder: ExperimentFolder) -> Plan:
    """`plan` with each complete cell replaced by the next repeat of it that the folder has no run of (a baseline's
    with a precision target numbered past its precision repeats, which a lane may pass over: `precision_repeat`)."""
    taken = set(folder.cell_states()) | {c.cell_id for c in plan.running + plan.queued}
    past = most_repeats(spec)
    wider = cells(dataclasses.replace(spec, repeats=past + len(taken)))  # room for every repeat so far
    fresh: list[Cell] = []
    for cell in plan.done:
        least = past if target(spec, cell) is not None else 0
        fresh.append(next(c for c in wider if c.mode == cell.mode and c.copies == cell.copies and c.jobs == cell.jobs
                          and c.repeat >= least and c.cell_id not in taken and c not in fresh))
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
