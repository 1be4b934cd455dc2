"""A cell run and then read back: `run_cell` writes (cell.py never reads its run back); here the read side reads the
run as `results.read_run` reads any run, writes the derived `jobs.csv` beside the raw records and tells the progress
display how it ended, on every exit path. Every executor runs a cell through `run_reported`.

    >>> reading = run_reported(spec, cell, placement, Path("runs"), bar)              # doctest: +SKIP
    >>> reading.summary["n_complete"]                                                 # doctest: +SKIP
    2
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from colloc_kit.analysis.results import RunReading, read_run
from colloc_kit.pipeline.cell import Placement, run_cell
from colloc_kit.pipeline.cells import Cell
from colloc_kit.pipeline.progress import Progress
from colloc_kit.spec import ExperimentSpec
from colloc_kit.store.rundir import RunDir
from colloc_kit.tracking.log import log_cell
from colloc_kit.worker.zygote import Zygote

__all__ = ["JOBS_CSV", "run_reported"]

JOBS_CSV = "jobs.csv"  # one row per job, derived from the events (a convenience copy; the events are the record)


def run_reported(spec: ExperimentSpec, cell: Cell, placement: Placement, out: Path, bar: Progress,
                 zygote: Zygote | None = None) -> RunReading:
    """Run `cell` into a new run directory under `out`, then read it back (also after an interrupt or an error,
    which then propagate); returns the reading. A cell that ended is also logged to `spec.mlflow` where set
    (`mlflow_log.log_cell`: a failure there is a warning)."""
    run = RunDir.create(out, spec.name, cell.label)
    try:
        run_cell(spec, cell, placement, run, bar, zygote)
    finally:
        reading = _report(run, bar)
    if spec.mlflow:
        log_cell(spec.mlflow, run, reading)
    return reading


def _report(run: RunDir, bar: Progress) -> RunReading:
    reading = read_run(run)
    pd.DataFrame(reading.jobs).to_csv(run.path / JOBS_CSV, index=False)
    summary = reading.summary
    bar.run_finished(f"{summary['n_complete']}/{summary['n_jobs']} complete, "
                     f"{summary['aggregate_images_per_s'] or 0:,.0f} img/s")
    return reading
