"""One run's records, made in one call (`read`): a frozen `RunFigures` (its common window, aggregate images/s and CI,
how it was measured, flags, bound_by, host figures) holding one `JobFigures` per job (its rate, its rate in the common
window, its CI, input wait, the monitor's figures with energy, steady memory, GPU idle share, bound_by, an inference
job's latency), and a `JobRow` per job (what it ran, what became of it, what it reported). `results.read_run` gathers
a run (`store.rundir.read_streams`), calls `read` once and makes the frame's rows of what it returns. Every rule is
`figures`' (one call: `figures.of_run`) or `latency`'s; this module only holds one run's figures as records.

    >>> stream = [{"type": "interval", "t": 2.0, "interval_s": 1.0, "interval_images": 100, "warmup": False},
    ...           {"type": "end", "t": 2.0, "images_per_s": 100.0}]
    >>> run = run_figures({"j0": stream}, {"j0": "complete"}, {"j0": {"device": "cpu"}}, Samples(), sequential=False)
    >>> run.aggregate_images_per_s, run.throughput_window, run.jobs["j0"].bound_by, run.jobs["j0"].latency
    (100.0, 'alone', 'cpu', {'role': 'train'})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from colloc_kit import events
from colloc_kit.analysis import figures, latency
from colloc_kit.monitor import Samples
from colloc_kit.store.manifest import JobEntry, JobOutcome
from colloc_kit.store.rundir import RunStreams

__all__ = ["JobFigures", "JobRow", "RunFigures", "RunRecords", "job_record", "read", "run_figures"]


@dataclass(frozen=True)
class JobFigures:
    """One job's figures: `images_per_s` over its own measured window, `images_per_s_overlap` over the run's common
    window, `images_per_s_ci` (95 % half-width over its intervals), `input_wait_share`, `monitor` (the monitor's
    `<metric>_mean/_p50/_p95`, `energy_j`, `energy_per_image_j` over its window), `steady_gpu_memory_mb`,
    `gpu_idle_share`, `bound_by` (`figures.bound_by`) and `latency` (`latency.job_figures`: an inference job's
    latency columns, a training job's role)."""

    images_per_s: float | None = None
    images_per_s_overlap: float | None = None
    images_per_s_ci: float | None = None
    input_wait_share: float | None = None
    monitor: Mapping[str, Any] = field(default_factory=dict)
    steady_gpu_memory_mb: float | None = None
    gpu_idle_share: float | None = None
    bound_by: str | None = None
    latency: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFigures:
    """A run's figures (`figures.run_throughput`'s, `figures.run_flags`') and its jobs' (`jobs`, by job id)."""

    window: figures.Window
    aggregate_images_per_s: float | None
    aggregate_images_per_s_ci: float | None
    throughput_window: str | None
    window_start: float | None
    window_end: float | None
    window_s: float | None
    window_note: str | None
    flags: str | None
    bound_by: str | None
    host: Mapping[str, Any]
    jobs: Mapping[str, JobFigures]

    SUMMARY = ("aggregate_images_per_s", "aggregate_images_per_s_ci", "throughput_window", "window_start",
               "window_end", "window_s", "window_note")  # the run's figures among its summary row's columns


@dataclass(frozen=True)
class JobRow:
    """One job's row of `Results.jobs` before the run's columns: what it ran (its manifest entry and `ready`
    event), what became of it (its outcome) and what it reported (its `measured`/`end` events). `job_record` makes
    it; `results.job_row` makes the frame's row of it, its slot's info as `slot_<key>` and its figures after."""

    job: str
    group: int | None
    slot_label: str | None
    model: str
    dataset: str
    data_root: str | None
    batch_size: int
    amp: str
    recipe: str
    cudnn_autotune: str  # study (the seed study's train.py) or off: part of the workload (lone.WORKLOAD)
    image_size: int | None
    dataset_label: str | None
    device: str
    interval_s: float | None
    workers: int | None
    cores_allowed: int | None
    cores_used: int | None
    status: str
    error_kind: events.ErrorKind | str | None
    error: str | None
    exit_code: int | None
    mode_problem: str | None
    images_per_s: float | None
    images_per_s_ci: float | None
    epoch_time_s: float | None
    step_time_s: float | None
    steady_s: float | None
    window_ended_by: str | None  # precision (until_ci met), seconds, steps, epochs (its budget), common (events.CLOSE)
    held_s: float | None
    steps: int | None
    images: int | None
    input_wait_share: float | None
    peak_memory_mb: float | None
    peak_gpu_allocated_mb: float | None
    peak_gpu_reserved_mb: float | None
    peak_host_rss_mb: float | None
    launched_at: float | None
    imports_s: float | None
    build_s: float | None
    primed_s: float | None
    ready_at: float | None
    started_at: float | None
    ended_at: float | None
    slot_info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecords:
    """One run read (`read`): what the store gathered (`streams`), its figures, and each job's `JobRow`."""

    streams: RunStreams
    figures: RunFigures
    jobs: Mapping[str, JobRow]


def read(streams: RunStreams) -> RunRecords:
    """The records of one run gathered by `store.rundir.read_streams`: its figures (`run_figures`, one call) and a
    `JobRow` of each job."""
    entries, record = streams.manifest.jobs, streams.manifest
    run = run_figures(streams.streams, {job: outcome.status.value for job, outcome in streams.outcomes.items()},
                      {entry.job: entry.spec for entry in entries}, streams.samples, record.sequential,
                      slice_s=min((e.spec["interval_s"] for e in entries if e.spec.get("interval_s")), default=1.0),
                      span=(record.started_at, record.ended_at))
    return RunRecords(streams, run, {entry.job: job_record(entry, streams.streams[entry.job],
                                                           streams.outcomes[entry.job], run.jobs[entry.job])
                                     for entry in entries})


def run_figures(streams: Mapping[str, Sequence[dict]], statuses: Mapping[str, str],
                specs: Mapping[str, Mapping[str, Any]], samples: Samples, sequential: bool, slice_s: float = 1.0,
                span: tuple[float | None, float | None] = (None, None)) -> RunFigures:
    """Every figure of one run from its jobs' event streams, their statuses and specs, and the monitor's samples
    (`figures.of_run`, one call), then each job's latency figures (`latency.run_latency`); `slice_s` the slices of
    its within-run CI, `span` the run's start and end (host figures where it had no common window)."""
    found = figures.of_run(streams, statuses, {job: spec["device"] for job, spec in specs.items()}, samples,
                           sequential, slice_s, span)
    spans, jobs = found.pop("spans"), found.pop("jobs")
    common = (found["window_start"], found["window_end"]) if found["window_start"] is not None else None
    serving = latency.run_latency(streams, specs, common, spans, sequential or len(streams) == 1)
    return RunFigures(**found, jobs={job: JobFigures(**jobs[job], latency=serving[job]) for job in streams})


def job_record(entry: JobEntry, stream: Sequence[dict], outcome: JobOutcome | events.Outcome,
               job_figures: JobFigures) -> JobRow:
    """One job's record from its manifest entry (spec, slot, what its outcome there says), its outcome (the
    manifest's, else its events'), its events and its figures."""
    last = {e["type"]: e for e in stream}
    end, ready, error = last.get(events.END, {}), last.get(events.READY, {}), last.get(events.ERROR, {})
    window = last.get(events.MEASURED) or end  # the measured window's figures (a job that failed after it has them)
    spec, slot, kept = entry.spec, entry.slot, entry.outcome  # slot: none until the mode handed out slots
    epoch_times = [e["epoch_time_s"] for e in stream if e["type"] == events.EPOCH and e.get("epoch_time_s")]
    gpu_peak, rate = end.get("peak_allocated_mb"), job_figures.images_per_s
    return JobRow(
        job=entry.job, group=entry.group, slot_label=slot.label if slot else None,
        model=spec["model"], dataset=spec["dataset"], data_root=spec.get("data_root"),
        batch_size=spec["batch_size"], amp=spec["amp"], cudnn_autotune=spec.get("cudnn_autotune", "study"),
        recipe=spec.get("recipe", "kit"), image_size=ready.get("image_size", spec.get("image_size")),
        dataset_label=ready.get("dataset_label"), device=spec["device"], interval_s=spec.get("interval_s"),
        workers=spec.get("workers"), cores_allowed=len(kept.cores) if kept and kept.cores else None,
        cores_used=len(kept.cores_ran_on) if kept and kept.cores_ran_on else None,
        status=outcome.status.value,
        error_kind=outcome.error_kind, error=outcome.error or error.get("message"),
        exit_code=kept.exit_code if kept else None, mode_problem=kept.mode_problem if kept else None,
        images_per_s=rate, images_per_s_ci=job_figures.images_per_s_ci,
        epoch_time_s=_epoch_time(epoch_times), step_time_s=spec["batch_size"] / rate if rate else None,
        steady_s=window.get("steady_s"), window_ended_by=kept.window_ended_by if kept else None,
        held_s=end.get("held_s"), steps=end.get("steps"), images=end.get("images"),
        input_wait_share=job_figures.input_wait_share,
        peak_memory_mb=gpu_peak if gpu_peak is not None else end.get("peak_rss_mb"),
        peak_gpu_allocated_mb=gpu_peak, peak_gpu_reserved_mb=end.get("peak_reserved_mb"),
        peak_host_rss_mb=end.get("peak_rss_mb"),
        launched_at=ready.get("launched_at"), imports_s=ready.get("imports_s"), build_s=ready.get("build_s"),
        primed_s=ready.get("primed_s"), ready_at=ready.get("t"), started_at=last.get(events.START, {}).get("t"),
        ended_at=end.get("t"), slot_info=dict(slot.info or {}) if slot else {})


def _epoch_time(times: list[float]) -> float | None:
    """Mean epoch time, leaving out the first epoch (it holds the warm-up) when there are later ones."""
    if not times:
        return None
    later = times[1:] or times
    return sum(later) / len(later)
