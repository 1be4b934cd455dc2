"""Every status a run or a job can have, with its meaning: the one table the manifest, the frames and the docs use.

A run's status is in its `manifest.json` (`status`) and in `load(...).runs`; a job's in the manifest's
`jobs[].outcome.status` and in `load(...).jobs`. No other value is ever written.

    >>> from colloc_kit.statuses import JOB_STATUSES, COMPLETE
    >>> JOB_STATUSES[COMPLETE]
    'trained its whole budget and reported its throughput'
"""

from __future__ import annotations

# job statuses
COMPLETE = "complete"
FAILED = "failed"
TIMED_OUT = "timed_out"
INTERRUPTED = "interrupted"

# run statuses (COMPLETE and INTERRUPTED too)
RUNNING = "running"
FAILED_JOBS = "failed_jobs"
RUN_ERROR = "error"

# cell statuses, in an experiment folder (`colloc-kit status`; RUNNING and FAILED too)
DONE = "done"
PENDING = "pending"

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
