"""The run pipeline: an experiment's cells planned from its spec and its folder, each cell run (cell.py) and read
back (report.py), wherever an executor runs them (executors/: this process, several GPUs, Slurm, a plug-in).

    cells.py      the cells of a spec; the plan (what to run, what to skip and why)
    precision.py  a lone baseline's repeats behind its series, each run only while it misses its target
    cell.py       one cell: mode, jobs, monitor, manifest (the write side)
    launcher.py   jobs started in a mode's slots behind a barrier, released together, closed with the first
    launched.py   one started job as the launcher holds it, and the thread that streams its events to its log
    outcome.py    what became of one job of a wave: its outcome, a suspended process, the out-of-memory killer
    progress.py   the progress line
    lane.py       the cells of one GPU one after another in one process, their jobs forked from one zygote
    warm.py       warm repeats: a cell's repeats as windows of one launch, which the lane keeps between them
    report.py     a cell run and read back (jobs.csv, the progress line)
    executors/    where cells run, behind one interface (`Executor`, `CellJob`)
    estimate.py   how long the cells take over the lanes, from the lanes measured in the folder (`--plan`)
    entry.py      a cell in a process of its own: a GPU executor's cell process, a Slurm task
    status.py     `colloc-kit status`
    spec_run.py   one experiment's cells under way: planned, submitted with their precision repeats, read back
    api.py        `run`, `run_spec`, `sweep` (also `colloc_kit.run`, ...)
    tally.py      what one command's several experiments measured, shared and reused, said once at its end

    >>> from colloc_kit.pipeline import run_spec
    >>> run_spec.__module__
    'colloc_kit.pipeline.api'
"""

from __future__ import annotations

from colloc_kit.pipeline.api import run, run_spec, sweep
from colloc_kit.pipeline.tally import Tally

__all__ = ["Tally", "run", "run_spec", "sweep"]
