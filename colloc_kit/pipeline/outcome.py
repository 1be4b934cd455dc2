"""What became of one job of a wave (`of_job`), as its `JobOutcome`: `events.job_outcome`'s rule (how the launcher
stopped it, its last events, its exit code), with what the launcher saw as it stopped it (its process suspended:
`suspended_note`) and who sent a SIGKILL the kit did not send (the kernel's out-of-memory killer, counted by the
machine: `supervise.oom_kills`).

    >>> of_job("j0", {}, None, -9, pid=1, released_at=None, oom_kills=None).error
    'worker killed by SIGKILL without reporting an error'
"""

from __future__ import annotations

import signal
from typing import Mapping

from colloc_kit import events, supervise
from colloc_kit.events import ErrorKind
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.manifest import JobOutcome
from colloc_kit.worker.reasons import HOST_MEMORY_ADVICE

__all__ = ["of_job", "suspended_note"]


def suspended_note(pid: int) -> str | None:
    """Why a job stopped at its limit made no progress, where its process `pid` is suspended (SIGSTOP); else None."""
    if not supervise.suspended(pid):
        return None
    return f"process {pid} was suspended (SIGSTOP, state T) when the limit came, so it made no progress: it was ended"


def of_job(job_id: str, last: Mapping[str, dict], stopped_as: str | None, code: int | None, pid: int,
           released_at: float | None, note: str | None = None, oom_kills: int | None = None) -> JobOutcome:
    """The outcome of job `job_id` (`events.job_outcome`, from how it was stopped, its last event of each type and
    its exit code), `note` added where it did not complete, with when and where it ran. A SIGKILL the kit did not
    send, while the kernel's out-of-memory killer killed on this machine (`oom_kills`: its count before), is out of
    memory."""
    status, error_kind, message = events.job_outcome(last, stopped_as, code)
    if error_kind == ErrorKind.KILLED and code == -signal.SIGKILL and oom_kills is not None:
        killed = (supervise.oom_kills() or 0) - oom_kills
        if killed > 0:
            error_kind, message = ErrorKind.OUT_OF_MEMORY, (
                f"killed (SIGKILL) by the kernel's out-of-memory killer, which killed {killed} process(es) on this "
                f"machine while it ran: host memory ran out; {HOST_MEMORY_ADVICE}")
    if note and status != COMPLETE:
        message = f"{message}; {note}"
    end = last.get(events.END)
    measured = last.get(events.MEASURED) or {}
    ci = measured.get("ci")
    return JobOutcome(job_id, status, error_kind=error_kind, error=message, exit_code=code,
                      released_at=released_at, ended_at=events.now(), pid=pid,
                      cores=last.get(events.READY, {}).get("cores"),
                      cores_ran_on=(end or measured).get("cores_ran_on"),
                      window_ci=None if ci is None else round(ci, 5), window_ended_by=measured.get("ended_by"))
