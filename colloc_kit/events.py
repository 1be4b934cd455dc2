"""The worker's event stream: one JSON object per line on stdout, the contract between worker, launcher and analysis.

Every event has `type`, `job` (the job id) and `t` (wall-clock seconds since the epoch, `time.time()`: the clock the
monitor samples on, so events and GPU samples align). Types and their fields:

- `ready`:    model built, first batch loaded, one priming step trained (cuDNN autotuning, lazy set-up: `primed_s`);
              the worker now waits at the start barrier (if it has one). Where its set-up time went: `launched_at`
              (the process's start, its fork for a worker forked from the zygote), `imports_s` (interpreter and
              torch; about 0 when forked), `build_s` (CUDA, model, data, first batch), `primed_s`. Also: model,
              dataset, dataset_label, device, batch_size, image_size, amp, channels_last, params, num_classes,
              steps_per_epoch, warmup_steps, threads, torch, pid.
- `start`:    released from the barrier; training begins. A warm repeat's later window (`ready` and `start`):
              `warm_window`, `warmup_steps` 0 (the job trained on, held, since its last window's `end`: its
              steady state never stopped), `held_before_s` and `held_steps` of that held training.
- `interval`: periodic progress: `step`, `images`, `loss`, `step_time_s` (mean over the interval), `data_wait_s`
              (time spent waiting for the loader in the interval), `warmup` (true while in warm-up), `held`
              (true past the job's budget, while it trains on until every job of the run has its window),
              `interval_s`, `interval_images`.
- `epoch`:    `epoch`, `epoch_time_s`, `images`, `images_per_s`.
- `measured`: the budget is met: `steps`, `steady_images`, `steady_s`, `images_per_s` of the measured window
              (after warm-up, as long as the budget says); the job then trains on (held) until told to stop.
- `end`:      `status` ("complete"), the `measured` fields, `steps`, `images`, `epochs`, `train_s` (all training,
              held steps included), `held_s`, `warmup_steps`, `peak_allocated_mb`, `peak_reserved_mb` (CUDA),
              `peak_rss_mb` (host); `note` where the budget ended inside warm-up (then `images_per_s` is null and
              `steady_s` 0).
- `error`:    `kind` (an `ErrorKind` a worker reports: out_of_memory, cuda_error, bad_input, other), `message`.

The other way, the kit writes lines to a worker's stdin: `GO` opens the start barrier, `STOP` ends its measured
training once every job of the run has its window (then it reports `end`). `PAUSE` ends it alike, then the worker
trains on, held, until `GO` (a warm repeat's next window) or `STOP`. `FEED {json}` while held (a feed swap,
`worker.train`): the worker replaces its feed by the one those JobSpec fields (`spec.FEED_FIELDS`) describe, says
`ready` again and trains on, held, on the new feed until `GO`. `CLOSE`: another job of the run has ended its window,
and so the run's common window: a training worker whose window is `seconds` (the most) ends its own at its next step
once it has a steady interval (its `measured` says `ended_by` "common"), rather than measure seconds that no figure
of the run counts. A worker whose stdin closes leaves.

    >>> w = EventWriter("job0", stream=io.StringIO())           # doctest: +SKIP
    >>> w.emit(READY, device="cuda:0")                          # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time
from enum import Enum
from typing import IO, Any, Mapping, NamedTuple

from colloc_kit.statuses import COMPLETE, FAILED, INTERRUPTED, TIMED_OUT, Status

__all__ = ["CLOSE", "END", "EPOCH", "ERROR", "FEED", "GO", "INTERVAL", "MEASURED", "READY", "START", "STOP", "TYPES",
           "ErrorKind", "EventWriter", "Outcome", "job_outcome", "now", "parse", "readable"]

READY, START, INTERVAL, EPOCH, MEASURED, END, ERROR = "ready", "start", "interval", "epoch", "measured", "end", "error"
TYPES = (READY, START, INTERVAL, EPOCH, MEASURED, END, ERROR)
GO, STOP, PAUSE = "go", "stop", "pause"  # the kit's lines to a worker's stdin (pause: stop, then wait for go)
FEED = "feed"  # a line `feed {json}`, while held: swap the worker's feed (`spec.FEED_FIELDS`)
CLOSE = "close"  # the run's common window has ended: end the measured window at the next step


class ErrorKind(str, Enum):
    """Why a job failed: the first four a worker reports in its `error` event, the rest the launcher finds from how
    the worker ended. A `str`: JSON, CSV and Parquet hold the value (`job.error_kind`).

    >>> ErrorKind("crashed") == "crashed"
    True
    """

    OUT_OF_MEMORY = "out_of_memory"  # the device or the host ran out of memory (the OOM killer's SIGKILL too)
    CUDA_ERROR = "cuda_error"        # any other CUDA error
    BAD_INPUT = "bad_input"          # the job's spec could not be run here (a model or dataset missing, ...)
    OTHER = "other"                  # anything else the worker caught, or a log the kit could not write
    CRASHED = "crashed"              # the worker exited with an error code without reporting one
    KILLED = "killed"                # the worker was killed by a signal without reporting an error
    TIMEOUT = "timeout"              # not ready in time, or past the run's time limit

    def __str__(self) -> str:
        return self.value

    def __format__(self, format_spec: str) -> str:  # f"{kind}" is the value on every Python version
        return str.__format__(self, format_spec)

    @classmethod
    def named(cls, value: object) -> "ErrorKind | None":
        """The kind whose value is `value`, or None where it names none (a foreign or older log's word).

        >>> ErrorKind.named("timeout"), ErrorKind.named("meltdown")
        (<ErrorKind.TIMEOUT: 'timeout'>, None)
        """
        return next((kind for kind in cls if kind.value == value), None)


class Outcome(NamedTuple):
    """What became of a job (`job_outcome`): its status, and where it did not complete, why."""

    status: Status
    error_kind: ErrorKind | None = None
    error: str | None = None


def job_outcome(last: Mapping[str, dict], stopped_as: str | None = None, exit_code: int | None = None,
                watched: bool = True) -> Outcome:
    """The one rule for what became of a job, from its last event of each type (`last`), how the kit stopped it
    (`stopped_as`: INTERRUPTED, TIMED_OUT or None) and its exit code. The launcher asks it as each job ends; a reader
    asks it with `watched=False` for a run whose manifest holds no outcome (the process that ran it died first).
    A job that reported its `end` is complete even where its exit code is unknown (the zygote that forked it died) or
    not 0 (a crash while tearing down): what it measured was reported in full.

    >>> job_outcome({END: {}}, exit_code=-9).status, job_outcome({ERROR: {"kind": "out_of_memory"}}).error_kind
    (<Status.COMPLETE: 'complete'>, <ErrorKind.OUT_OF_MEMORY: 'out_of_memory'>)
    >>> job_outcome({}, watched=False).error
    'the run ended before this job reported an outcome'
    """
    end, error = last.get(END), last.get(ERROR)
    if stopped_as == INTERRUPTED:
        return Outcome(INTERRUPTED, None, "stopped by an interrupt (Ctrl-C or kernel interrupt)")
    if stopped_as == TIMED_OUT:
        reason = "did not get ready in time" if READY not in last else "stopped at its time limit"
        return Outcome(TIMED_OUT, ErrorKind.TIMEOUT, reason)
    if end is not None:  # it reported its end: its results are whole, whatever happened to its parent after
        return Outcome(COMPLETE)
    if error is not None:
        return Outcome(FAILED, ErrorKind.named(error.get("kind")) or ErrorKind.OTHER, error.get("message"))
    if not watched:
        return Outcome(INTERRUPTED, None, "the run ended before this job reported an outcome")
    if exit_code is not None and exit_code < 0:
        name = signal.Signals(-exit_code).name
        return Outcome(FAILED, ErrorKind.KILLED, f"worker killed by {name} without reporting an error")
    return Outcome(FAILED, ErrorKind.CRASHED, f"worker exited with code {exit_code} without reporting an error")


def now() -> float:
    """The kit's clock: wall-clock seconds (`time.time()`), shared by workers, launcher and monitor."""
    return time.time()


class EventWriter:
    """Writes events as JSON lines, flushed at once so the launcher sees them live."""

    def __init__(self, job_id: str, stream: IO[str] | None = None):
        self.job_id = job_id
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def emit(self, type_: str, **fields: Any) -> dict:
        """Write one event of `type_` (a JSON line with the job and the kit clock) and return it.

        >>> import io
        >>> EventWriter("j0", io.StringIO()).emit("ready", step=0)["job"]
        'j0'
        """
        event = {"type": type_, "job": self.job_id, "t": now(), **fields}
        line = json.dumps(event, default=float)
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()
        return event


NEEDED = {INTERVAL: ("interval_s", "interval_images"), EPOCH: ("epoch",)}  # numbers a reader computes with
NUMBERS = ("images_per_s", "steady_s", "steady_images", "epoch_time_s", "images", "steps", "data_wait_s",
           "peak_allocated_mb", "peak_reserved_mb", "peak_rss_mb")  # numbers (or null) wherever they appear


def readable(event: dict) -> bool:
    """Whether an event carries the numbers analysis reads: its time `t` and, by type, the fields of NEEDED (an
    interval lasting more than 0 s); and NUMBERS, where present, are numbers or null. A line from elsewhere in a
    log is skipped by readers, not crashed on."""
    needed = all(_is_number(event.get(k)) for k in ("t", *NEEDED.get(event["type"], ())))
    return (needed and all(event.get(k) is None or _is_number(event[k]) for k in NUMBERS)
            and not (event["type"] == INTERVAL and event["interval_s"] <= 0))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse(line: str) -> dict | None:
    """An event from one line of a worker's stdout, or None for anything that is not an event."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and event.get("type") in TYPES else None
