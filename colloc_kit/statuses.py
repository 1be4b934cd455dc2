"""Every status a run, a job or a cell can have, with its meaning: the one table the manifest, the frames, the CLI
and the docs use.

A run's status is in its `manifest.json` (`status`) and in `load(...).runs`; a job's in the manifest's
`jobs[].outcome.status` and in `load(...).jobs`; a cell's in `colloc-kit status`. No other value is ever written.
A `Status` is a `str`: it compares equal to its value, and JSON, CSV and Parquet store the value.

    >>> from colloc_kit.statuses import JOB_STATUSES, Status
    >>> JOB_STATUSES[Status.COMPLETE]
    'trained its whole budget and reported its throughput'
    >>> Status("failed_jobs") == "failed_jobs", f"{Status.TIMED_OUT}"
    (True, 'timed_out')
"""

from __future__ import annotations

from enum import Enum

__all__ = ["CELL_STATUSES", "COMPLETE", "DONE", "FAILED", "FAILED_JOBS", "INTERRUPTED", "JOB_STATUSES", "PENDING",
           "RUNNING", "RUN_ERROR", "RUN_STATUSES", "Status", "TIMED_OUT"]


class Status(str, Enum):
    """A run's, a job's or a cell's status; which apply to which, and what each means: JOB_STATUSES, RUN_STATUSES,
    CELL_STATUSES."""

    COMPLETE = "complete"        # job, run
    FAILED = "failed"            # job, cell
    TIMED_OUT = "timed_out"      # job
    INTERRUPTED = "interrupted"  # job, run
    RUNNING = "running"          # run, cell (and a job of a run still under way, as read back)
    FAILED_JOBS = "failed_jobs"  # run
    RUN_ERROR = "error"          # run
    DONE = "done"                # cell
    PENDING = "pending"          # cell

    def __str__(self) -> str:
        return self.value

    def __format__(self, format_spec: str) -> str:  # f"{status}" is the value on every Python version
        return str.__format__(self, format_spec)


COMPLETE, FAILED, TIMED_OUT, INTERRUPTED = Status.COMPLETE, Status.FAILED, Status.TIMED_OUT, Status.INTERRUPTED
RUNNING, FAILED_JOBS, RUN_ERROR = Status.RUNNING, Status.FAILED_JOBS, Status.RUN_ERROR
DONE, PENDING = Status.DONE, Status.PENDING

JOB_STATUSES = {
    COMPLETE: "trained its whole budget and reported its throughput",
    FAILED: "stopped by an error (error_kind and error say which: out_of_memory, cuda_error, bad_input, crashed, "
            "killed, other, e.g. a log the kit could not write)",
    TIMED_OUT: "stopped by the launcher: not ready in time, or past the run's time limit",
    INTERRUPTED: "stopped by Ctrl-C, a kernel interrupt or SIGTERM, or never started because the run stopped first",
}

RUN_STATUSES = {
    RUNNING: "under way; read back as interrupted when the process that ran it is gone (it died before finishing)",
    COMPLETE: "every job complete",
    FAILED_JOBS: "at least one job did not complete; the others' results are kept",
    INTERRUPTED: "stopped by Ctrl-C, a kernel interrupt or SIGTERM; what was measured is kept",
    RUN_ERROR: "the kit itself failed during the run (the mode, the disk, ...); `problems` says what",
}

CELL_STATUSES = {
    DONE: "a run of the cell completed; rerunning the command skips it",
    RUNNING: "a live process (here, or a Slurm task) runs it now",
    FAILED: "its latest run did not complete (failed jobs, interrupted, an error), or its Slurm task ended without a "
            "run; rerunning the command runs it again",
    PENDING: "not run yet (or queued in Slurm)",
}
