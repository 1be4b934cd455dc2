"""A run's figures in one call, as frozen records: `run_figures` returns a `RunFigures` (its common window, aggregate
images/s and CI, how it was measured, flags, bound_by, host figures) holding one `JobFigures` per job (its rate, its
rate in the common window, its CI, input wait, the monitor's figures with energy, steady memory, GPU idle share,
bound_by). `results.read_run` gathers a run's inputs, calls it once and makes a `JobRow` of each job. Every rule is
`figures`'; this module only applies them to one run.

    >>> stream = [{"type": "interval", "t": 2.0, "interval_s": 1.0, "interval_images": 100, "warmup": False},
    ...           {"type": "end", "t": 2.0, "images_per_s": 100.0}]
    >>> run = run_figures({"j0": stream}, {"j0": "complete"}, {"j0": "cpu"}, Samples(), sequential=False)
    >>> run.aggregate_images_per_s, run.throughput_window, run.jobs["j0"].bound_by
    (100.0, 'alone', 'cpu')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd

from colloc_kit import events
from colloc_kit.analysis import figures
from colloc_kit.monitor import Samples, summarize
from colloc_kit.statuses import COMPLETE

__all__ = ["HOST_FIGURES", "JobFigures", "JobRow", "RunFigures", "gpu_summary", "run_figures"]

HOST_FIGURES = ("cpu_util_pct", "cpu_steal_pct", "cpu_freq_mhz")  # recorded per run: what can swing a lone job


@dataclass(frozen=True)
class JobFigures:
    """One job's figures: `images_per_s` over its own measured window, `images_per_s_overlap` over the run's common
    window, `images_per_s_ci` (95 % half-width over its intervals), `input_wait_share`, `monitor` (the monitor's
    `<metric>_mean/_p50/_p95`, `energy_j`, `energy_per_image_j` over its window), `steady_gpu_memory_mb`,
    `gpu_idle_share` and `bound_by` (`figures.bound_by`)."""

    images_per_s: float | None = None
    images_per_s_overlap: float | None = None
    images_per_s_ci: float | None = None
    input_wait_share: float | None = None
    monitor: Mapping[str, Any] = field(default_factory=dict)
    steady_gpu_memory_mb: float | None = None
    gpu_idle_share: float | None = None
    bound_by: str | None = None


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

    def summary(self) -> dict[str, Any]:
        """The run's figures as its summary row's columns (`results.read_run`)."""
        return {"aggregate_images_per_s": self.aggregate_images_per_s,
                "aggregate_images_per_s_ci": self.aggregate_images_per_s_ci,
                "throughput_window": self.throughput_window, "window_start": self.window_start,
                "window_end": self.window_end, "window_s": self.window_s, "window_note": self.window_note}


@dataclass(frozen=True)
class JobRow:
    """One job's row of `Results.jobs` before the run's columns: what it ran (its manifest entry and `ready`
    event), what became of it (its outcome) and what it reported (its `measured`/`end` events). `results.job_row`
    makes it; `row()` is the frame's row, its slot's info as `slot_<key>` and its figures after."""

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
    window_ended_by: str | None  # precision (until_ci met), seconds, steps or epochs (its budget)
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

    def row(self, base: Mapping[str, Any], run: Mapping[str, Any], job_figures: JobFigures) -> dict[str, Any]:
        """The frame's row: the run's `base` columns, this record's, `slot_<key>`, the run's columns `run` (its
        status and folder), then the job's figures not already among its columns (the monitor's flattened)."""
        facts = asdict(self)
        slot = {f"slot_{k}": v for k, v in facts.pop("slot_info").items()}
        own = {k: v for k, v in asdict(job_figures).items() if k not in facts}
        measured, monitor = {"images_per_s_overlap": own.pop("images_per_s_overlap")}, own.pop("monitor")
        return {**base, **facts, **slot, **measured, **run, **monitor, **own}


def run_figures(streams: Mapping[str, Sequence[dict]], statuses: Mapping[str, str], devices: Mapping[str, str],
                samples: Samples, sequential: bool, slice_s: float = 1.0,
                span: tuple[float | None, float | None] = (None, None)) -> RunFigures:
    """Every figure of one run from its jobs' event streams, their statuses and devices, and the monitor's samples;
    `slice_s` the slices of its within-run CI, `span` the run's start and end (host figures where it had no common
    window)."""
    throughput = figures.run_throughput(streams, statuses, sequential, slice_s)
    rates: dict[str, float] = throughput.pop("job_rates")
    window = figures.Window(throughput["window_start"], throughput["window_end"])
    monitored = len(samples.gpu) > 0
    shared = gpu_summary(samples.gpu, window, streams.values()) if monitored and window else {}  # one for all jobs
    alone_in_turn = sequential or len(streams) == 1  # each job measured on its own window
    jobs = {}
    for job, stream in streams.items():
        rate = _reported_rate(stream)
        span_own = figures.steady_span(stream, held=False) if alone_in_turn and rate else None
        own = figures.Window(*span_own) if span_own else None
        monitor = gpu_summary(samples.gpu, own, [stream]) if monitored and own else shared
        jobs[job] = _job_figures(stream, devices[job], rate, rates.get(job), monitor,
                                 _steady_memory(samples.process, job, own or window))
    n_complete = sum(status == COMPLETE for status in statuses.values())
    run_span = window or figures.Window(*span)
    host = summarize(samples.host, *run_span.bounds()) if len(samples.host) and run_span.seconds > 0 else {}
    return RunFigures(window=window, **throughput, flags=figures.run_flags(throughput, len(streams), n_complete),
                      bound_by=_run_verdict([j.bound_by for j in jobs.values()]),
                      host={f"host_{k}_mean": host.get(f"{k}_mean") for k in HOST_FIGURES}, jobs=jobs)


def _job_figures(stream: Sequence[dict], device: str, rate: float | None, overlap_rate: float | None,
                 monitor: Mapping[str, Any], steady_memory: float | None) -> JobFigures:
    """One job's `JobFigures`: its GPU idle share and `bound_by` from its input wait and the monitor's figures."""
    util = monitor.get("gpu_util_pct_mean")
    gpu_idle = None if util is None else max(0.0, 1 - util / 100)
    input_wait = figures.input_wait_share(stream)
    verdict = figures.bound_by(device, input_wait, gpu_idle, monitor.get("sm_util_pct_mean"),
                               monitor.get("dram_bw_util_pct_mean"))
    return JobFigures(images_per_s=rate, images_per_s_overlap=overlap_rate,
                      images_per_s_ci=figures.ci95(figures.interval_rates(stream))[1], input_wait_share=input_wait,
                      monitor=monitor, steady_gpu_memory_mb=steady_memory, gpu_idle_share=gpu_idle,
                      bound_by=verdict)


def _reported_rate(stream: Sequence[dict]) -> float | None:
    """The images/s a job reported for its measured window (its `measured` event, else its `end`)."""
    last = {e["type"]: e for e in stream}
    return (last.get(events.MEASURED) or last.get(events.END) or {}).get("images_per_s")


def gpu_summary(gpu_samples: pd.DataFrame, window: figures.Window, streams: Any) -> dict:
    """The monitor's figures over `window`, and the energy per image the given jobs trained in it."""
    start, end = window.bounds()
    figures_ = summarize(gpu_samples, start, end)
    images = sum(figures.window_images(stream, start, end) for stream in streams)
    energy_j = figures_.get("energy_j")
    figures_["energy_per_image_j"] = energy_j / images if energy_j and images else None
    return figures_


def _run_verdict(verdicts_: Sequence[str | None]) -> str | None:
    """The run's `bound_by`: its jobs' verdict where they agree, else 'mixed: ...'."""
    verdicts = sorted({v for v in verdicts_ if v})
    return verdicts[0] if len(verdicts) == 1 else ("mixed: " + ", ".join(verdicts) if verdicts else None)


def _steady_memory(process_samples: pd.DataFrame, job: str, window: figures.Window | None) -> float | None:
    """Median device memory NVML reports for the job's processes inside its window (summed over its processes)."""
    if not window or process_samples.empty or "job" not in process_samples:
        return None
    rows = process_samples[(process_samples["job"] == job) & process_samples["t"].between(window.start, window.end)]
    per_sample = rows.groupby("t")["gpu_mem_used_mb"].sum(min_count=1).dropna()
    return float(per_sample.median()) if len(per_sample) else None
