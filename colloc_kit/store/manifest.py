"""A run's manifest (`manifest.json`) as a typed record, with its one reader and its one writer.

The manifest says what a run was asked (spec, mode, copies), where it ran (host, GPU, cores) and what became of it
(status, each job's outcome, problems). Every key of the JSON file is a field of a record below, with its unit; this
module is the only place that knows the keys. Times are Unix seconds (`events.now()`).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / MANIFEST
    >>> spec = {"model": "smallcnn", "dataset": "synthetic", "batch_size": 64, "amp": "off", "device": "cpu"}
    >>> write(path, Manifest(mode=ModeRecord("naive"), jobs=[JobEntry("j0-smallcnn", spec=spec)]))
    >>> manifest = read(path)
    >>> manifest.status == "running", manifest.jobs[0].spec["model"]
    (True, 'smallcnn')
    >>> from dataclasses import replace
    >>> write(path, replace(manifest, status=Status.COMPLETE))
    >>> read(path).status
    <Status.COMPLETE: 'complete'>

The reader takes manifests that older versions of the kit wrote: a missing optional key gets its default, a key it
does not know is kept (`extra`) and written back, and a run written before cells (its `machine` the whole machine
description) still names its host and GPU.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, cast

from colloc_kit import atomic
from colloc_kit.errors import BrokenRun
from colloc_kit.events import ErrorKind
from colloc_kit.statuses import JOB_STATUSES, RUN_STATUSES, RUNNING, Status

__all__ = ["FORMAT", "MANIFEST", "HostCpu", "JobEntry", "JobOutcome", "MachineRef", "Manifest", "ModeRecord",
           "MonitorSettings", "SlotRecord", "WarmWindow", "read", "write"]

FORMAT = "colloc-kit-run/1"  # the file's first key
MANIFEST = "manifest.json"
WRITTEN_WHEN_SET = "written_when_set"  # field metadata: a key the JSON holds only where it has a value
JOB_SPEC_KEYS = ("model", "dataset", "batch_size", "amp", "device")  # what a reader needs of each job's spec


class _Record:
    """What every record shares: its JSON object, with the keys this version does not know (`extra`) kept."""

    extra: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object the manifest holds (nested records as objects, statuses as strings)."""
        known = {f.name: _plain(getattr(self, f.name)) for f in fields(cast(Any, self)) if f.name != "extra"
                 and not (f.metadata.get(WRITTEN_WHEN_SET) and getattr(self, f.name) is None)}
        return {**known, **{k: v for k, v in self.extra.items() if k not in known}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """The record of its JSON object: a missing key gets the field's default, an unknown one is kept."""
        return cls._build(data)

    @classmethod
    def _build(cls, data: dict[str, Any], **converted: Any) -> Any:
        """The record of `data`: its known keys as fields (`converted` where a field needs more than the JSON
        value), a missing key as the field's default, the others into `extra`."""
        record = cast(Any, cls)  # every record is a dataclass with an `extra` field
        names = {f.name for f in fields(record)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        return record(**{**known, **converted}, extra={k: v for k, v in data.items() if k not in names})


def _plain(value: Any) -> Any:
    """`value` as JSON holds it: records as objects, statuses and error kinds as their strings."""
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class ModeRecord(_Record):
    """The sharing mode as the run asked for it: its name, its options and its label (e.g. "mps-50")."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class MachineRef(_Record):
    """Where the run ran: the host, the GPU's name and UUID (None on the CPU), and the machine description
    (`machines/<host>-<time>.json`, relative to the run directory; None for a run written before cells)."""

    hostname: str | None = None
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], gpu: int = 0) -> "MachineRef":
        """The record of the manifest's `machine`; a run written before cells held the whole description there:
        its host and GPU `gpu` are read from it (and the description kept in `extra`)."""
        if "host" in data and "hostname" not in data:
            card: dict[str, Any] = next((g for g in data.get("gpus") or [] if g.get("index") == gpu), {})
            return cls(hostname=data["host"].get("hostname"), gpu_name=card.get("name"), extra=data)
        return cls._build(data)


@dataclass(frozen=True)
class HostCpu(_Record):
    """The host CPU the run had: the cores it was allowed (`sched_getaffinity`) and the CPU seconds (user + system)
    its jobs used, known at the end."""

    cores: list[int] = field(default_factory=list)
    cpu_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class WarmWindow(_Record):
    """A warm repeat's place (`ExperimentSpec.warm_repeats`): the run whose launch primed the jobs that measured this
    run (its own id for the launch's first window) and which window of that launch this run is (0: the first). A
    later window ran no warm-up for its training jobs (`warmup_steps` 0, whatever their specs say): they trained on,
    held, from the end of the launch's last window until its release, `held_before_s` (each job's `start` event says
    its own; a server idles while held and warms up again, as its `start` event says: `worker.serve`). A
    window whose jobs' feed was swapped (`ExperimentSpec.feed_swaps`) names the run whose feed it replaced,
    `feed_from`, and ran its jobs' warm-up on the new feed."""

    launch: str | None = None
    window: int = 0
    warmup_steps: int | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})  # None: the jobs' specs say
    held_before_s: float | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    feed_from: str | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class MonitorSettings(_Record):
    """Whether the monitor sampled the run, and its interval in seconds (None: not recorded)."""

    enabled: bool | None = None
    interval_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SlotRecord(_Record):
    """The slot a job was given (`modes.Slot`): its label and what the mode says of it (e.g. a MIG profile)."""

    label: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class JobOutcome(_Record):
    """What became of one job: its status (`statuses.JOB_STATUSES`) and, where it did not complete, why.

    `error_kind` is an `events.ErrorKind` (a value an older kit wrote that is no kind now stays a string);
    `released_at` is when
    the start barrier released it and `ended_at` when it ended (Unix seconds); `cores` the host cores it was allowed
    and `cores_ran_on` those its processes (main and loader workers) were seen on while it trained; `window_ci` the
    relative 95 % CI half-width of its images/s when its measured window ended, and `window_ended_by` why it ended
    then (precision: `JobSpec.until_ci` was met; seconds, steps or epochs: its budget; common: another job of the run
    ended its window first, and with it the run's common window, `events.CLOSE`); `mode_problem` what the
    sharing mode saw go wrong (e.g. an MPS server fault), on a job that did not complete.

    >>> JobOutcome("j0", "complete").status
    <Status.COMPLETE: 'complete'>
    """

    job_id: str
    status: Status
    error_kind: ErrorKind | str | None = None
    error: str | None = None
    exit_code: int | None = None
    released_at: float | None = None
    ended_at: float | None = None
    pid: int | None = None
    cores: list[int] | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    cores_ran_on: list[int] | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    window_ci: float | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    window_ended_by: str | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    mode_problem: str | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        with suppress(ValueError):  # the enum's own lookup: a word that names no kind now stays a string
            object.__setattr__(self, "error_kind", ErrorKind(self.error_kind))


@dataclass(frozen=True)
class JobEntry(_Record):
    """One job of the run: its id, its job group, its spec as run (`JobSpec.to_dict()`, kept as written, so that a
    spec of an older kit still reads), its slot (None until the mode handed out slots) and its outcome (None until
    the run ended)."""

    job: str
    _: KW_ONLY
    group: int | None = None
    spec: dict[str, Any]
    slot: SlotRecord | None = None
    outcome: JobOutcome | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobEntry":
        """The record of one of the manifest's `jobs`."""
        slot, outcome = data.get("slot"), data.get("outcome")
        return cls._build(data, slot=None if slot is None else SlotRecord.from_dict(slot),
                          outcome=None if outcome is None else JobOutcome.from_dict({"job_id": data["job"], **outcome}))


@dataclass(frozen=True, kw_only=True)
class Manifest(_Record):
    """A run's manifest: what it was asked, where it ran, how it ended. A status of "running" that no live process
    holds belongs to a run that was killed (`cells`, `results` read it so).

    `alone` says whether the run's jobs each had the device to themselves (a baseline), as its mode said when the
    run was written (None in a manifest of an older kit: `is_alone` then applies the built-in modes' rule).
    `placement` is how its jobs sat on the host's cores (`spec.PLACEMENTS`; None: an older kit's, pinned blocks of at
    most 4 cores).
    `spec` is the experiment's spec as run (`ExperimentSpec.to_dict()`); `gpu` the GPU index the cell was given
    (None for CPU jobs outside a dispatcher); `runner_pid` the process that ran it, on `machine.hostname`, and
    `runner_started_at` when that process started (the pair tells it from a later process given the same pid);
    `mode_state` what the mode set up and did (`SharingMode.state()`); `problems` what went wrong outside the jobs.
    Build one with its fields, change one with `replace`, store it with `write`, read it with `read`.
    """

    run_id: str | None = None
    experiment: str | None = None
    cell_id: str | None = None
    status: Status = RUNNING  # statuses.RUN_STATUSES
    started_at: float | None = None  # Unix seconds
    ended_at: float | None = None  # Unix seconds; None while it runs
    mode: ModeRecord
    copies: int | None = None
    repeat: int | None = None
    sequential: bool = False
    alone: bool | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    placement: str | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})
    spec: dict[str, Any] = field(default_factory=dict)
    gpu: int | None = None
    runner_pid: int | None = None
    runner_started_at: float | None = None  # Unix seconds: the runner process's start time, as the OS records it
    slurm_job_id: str | None = None
    machine: MachineRef = field(default_factory=MachineRef)
    host_cpu: HostCpu = field(default_factory=HostCpu)
    mode_state: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    monitor: MonitorSettings = field(default_factory=MonitorSettings)
    warm: WarmWindow | None = field(default=None, metadata={WRITTEN_WHEN_SET: True})  # a warm repeat's window
    jobs: list[JobEntry]
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @property
    def is_alone(self) -> bool:
        """Whether the run was a baseline: `alone` as recorded; for an older kit's manifest, the built-in modes' rule
        from what it records (a sequential mode, or one job time-sliced with nothing), never today's plug-ins.

        >>> Manifest(mode=ModeRecord("naive"), jobs=[JobEntry("j0", spec={})]).is_alone
        True
        >>> Manifest(mode=ModeRecord("mps"), jobs=[JobEntry("j0", spec={})], alone=False).is_alone
        False
        """
        if self.alone is not None:
            return self.alone
        return self.sequential or (self.mode.name == "naive" and len(self.jobs) == 1)

    @classmethod
    def from_dict(cls, data: Any) -> "Manifest":
        """The record of a manifest's JSON object; BrokenRun saying what is wrong where it is not a run's manifest.

        >>> Manifest.from_dict({"mode": {"name": "naive"}, "jobs": []}).machine.hostname is None
        True
        >>> Manifest.from_dict({"mode": {}, "jobs": []})
        Traceback (most recent call last):
        colloc_kit.errors.BrokenRun: no mode name (mode.name)
        """
        problem = _problem(data)
        if problem:
            raise BrokenRun(problem)
        data = {k: v for k, v in data.items() if k != "format"}
        try:
            return cls._build(
                data, mode=ModeRecord.from_dict(data["mode"]), jobs=[JobEntry.from_dict(e) for e in data["jobs"]],
                machine=MachineRef.from_dict(data.get("machine") or {}, (data.get("spec") or {}).get("gpu", 0)),
                host_cpu=HostCpu.from_dict(data.get("host_cpu") or {}),
                monitor=MonitorSettings.from_dict(data.get("monitor") or {}),
                warm=WarmWindow.from_dict(data["warm"]) if data.get("warm") else None)
        except (AttributeError, TypeError) as exc:  # a field of the wrong JSON type, e.g. a list for an object
            raise BrokenRun(f"a field of the wrong type ({exc})") from None


def read(path: str | Path) -> Manifest:
    """The manifest at `path`; BrokenRun saying what is wrong when it is unreadable, not JSON or not a run's
    manifest."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, not JSON (a torn write, a foreign file)
        raise BrokenRun(f"{path} cannot be read as JSON ({getattr(exc, 'strerror', None) or exc})", path=path) from None
    try:
        return Manifest.from_dict(data)
    except BrokenRun as exc:
        raise BrokenRun(f"{path} is not a colloc-kit run manifest: {exc}", path=path) from None


def write(path: str | Path, manifest: Manifest) -> None:
    """Write atomically (`atomic.write_json`): a reader never sees half a manifest, a failed write leaves the previous
    one and no temp file; on a full disk it is rewritten compactly in the space it already has, where it fits, so
    that a run still records how it ended; else the error names the manifest."""
    atomic.write_json(path, {"format": FORMAT, **manifest.to_dict()})


def _problem(data: Any) -> str | None:
    """What makes `data` unreadable as a run's manifest (the keys a reader relies on), or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    mode, jobs = data.get("mode"), data.get("jobs")
    if not (isinstance(mode, dict) and isinstance(mode.get("name"), str)):
        return "no mode name (mode.name)"
    if data.get("status", RUNNING) not in RUN_STATUSES:
        return f"unknown run status {str(data.get('status'))[:40]!r}"
    if not isinstance(jobs, list):
        return "no job list (jobs)"
    for i, entry in enumerate(jobs):
        if not (isinstance(entry, dict) and isinstance(entry.get("job"), str) and entry["job"].strip(".")
                and "/" not in entry["job"] and isinstance(entry.get("spec"), dict)
                and all(k in entry["spec"] for k in JOB_SPEC_KEYS)):
            return f"jobs[{i}] lacks a job id or its spec ({', '.join(JOB_SPEC_KEYS)})"
        outcome, slot = entry.get("outcome"), entry.get("slot")
        if outcome is not None and not (isinstance(outcome, dict) and outcome.get("status") in JOB_STATUSES):
            return f"jobs[{i}] has an outcome without a known status"
        if slot is not None and not isinstance(slot, dict):
            return f"jobs[{i}] has a slot that is not an object"
    return None
