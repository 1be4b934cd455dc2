"""A cell run and then read back: `run_cell` writes (cell.py never reads its run back); here the read side reads the
run as `results.read_run` reads any run, writes the derived `jobs.csv` beside the raw records and tells the progress
display how it ended, on every exit path. Every executor runs a cell through `run_reported`.

    >>> reading = run_reported(spec, cell, placement, Path("runs"), bar)              # doctest: +SKIP
    >>> reading.summary["n_complete"]                                                 # doctest: +SKIP
    2
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from pathlib import Path

import pandas as pd

from colloc_kit import atomic
from colloc_kit.analysis.results import RunReading, read_run
from colloc_kit.pipeline.cell import Placement, run_cell
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.progress import Progress
from colloc_kit.pipeline.warm import Kept
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import Status
from colloc_kit.store.rundir import RunDir
from colloc_kit.tracking.log import log_cell
from colloc_kit.worker.zygote import Zygote

__all__ = ["JOBS_CSV", "run_read_later", "run_reported"]

JOBS_CSV = "jobs.csv"  # one row per job, derived from the events (a convenience copy; the events are the record)


def run_reported(spec: ExperimentSpec, cell: Cell, placement: Placement, out: Path, bar: Progress,
                 zygote: Zygote | None = None) -> RunReading:
    """Run `cell` into a new run directory under `out`, then read it back (also after an interrupt or an error,
    which then propagate); returns the reading. A cell that ended is also logged to `spec.mlflow` where set
    (`mlflow_log.log_cell`: a failure there is a warning)."""
    return run_read_later(spec, cell, placement, out, bar, zygote)[1].result()


def run_read_later(spec: ExperimentSpec, cell: Cell, placement: Placement, out: Path, bar: Progress,
                   zygote: Zygote | None = None, reader: Executor | None = None,
                   kept: Kept | None = None) -> tuple[Status, Future[RunReading]]:
    """As `run_reported`, but the read-back and the MLflow log of a cell that ended go to `reader` (a lane's thread:
    its next cell starts meanwhile; None: here, before this returns). Returns the cell's status, from its manifest,
    and its reading to come. After an interrupt or an error the run is read back here, and then it propagates.
    `kept`: the lane's kept launch (`pipeline.warm`), for a spec with warm repeats."""
    run = RunDir.create(out, spec.name, cell.label)
    try:
        manifest = run_cell(spec, cell, placement, run, bar, zygote, kept)
    except BaseException:
        _report(run, bar, bar.label)
        raise
    label = bar.label  # the cell's, as its run started: the next cell's replaces it while this one is read back
    if reader is not None:
        return manifest.status, reader.submit(_read_back, spec, run, bar, label)
    read: Future[RunReading] = Future()
    read.set_result(_read_back(spec, run, bar, label))
    return manifest.status, read


def _read_back(spec: ExperimentSpec, run: RunDir, bar: Progress, label: str) -> RunReading:
    reading = _report(run, bar, label)
    if spec.mlflow:
        log_cell(spec.mlflow, run, reading)
    return reading


def _report(run: RunDir, bar: Progress, label: str) -> RunReading:
    reading = read_run(run)
    with atomic.replacing(run.path / JOBS_CSV) as tmp:  # a reader of the folder never sees half of it
        pd.DataFrame(reading.jobs).to_csv(tmp, index=False)
    summary = reading.summary
    bar.run_finished(f"{summary['n_complete']}/{summary['n_jobs']} complete, "
                     f"{summary['aggregate_images_per_s'] or 0:,.0f} img/s", label=label)
    return reading
