"""The kit's figures, each defined once: the common window, throughput, baselines, normalized throughput and
epoch-time growth, fairness and shares asked vs had, confidence intervals, why a job gains (`bound_by`) and memory
fit.

The CLI's tables, `load()`, `analysis`, the notebooks, the panel and `benchmarks/` all call these functions, so one
run shows one number wherever it is shown. The rules:

- **Common window.** Jobs that start together train until every one of them has its measured window (the launcher's
  stop protocol), so their measured windows overlap. The common window is the span in which every job that reached
  steady state was inside its own measured window: from the last job's end of warm-up to the first job's end of its
  window. Held steps (a job training on, unmeasured, until its neighbours are done) keep the device as busy as
  before but are not counted: around a window's end jobs synchronise, report and wait to be stopped.
  A job that failed ends its steady span when it fails, so the window ends there too; a job that never reached
  steady state (it failed while warming up) is left out of the window and named in the run's flags.
- **Aggregate throughput** of jobs that ran together: the images every job trained inside the common window, over the
  window's length. A job that failed later contributes what it trained inside the window: the device did that work
  with all jobs present, and leaving it out would make a failure look like a slowdown. Interval events that straddle
  an edge of the window count pro rata. Jobs run one after another (exclusive) each have the device alone: their
  aggregate is all measured images over all measured seconds. Where there is no common window the aggregate falls
  back to the sum of the complete jobs' own rates, `throughput_window = "own"`, and the run is flagged.
- **Baseline** of a workload: the mean rate of its lone jobs (exclusive runs, or a one-job naive run) in the *same
  experiment*. An experiment without one has no baseline (NaN and a note saying what to run), never a borrowed one;
  `analysis.with_baselines(..., reference=...)` borrows explicitly.
- **Relative throughput** of a job: its rate in the common window over its workload's baseline; a run's
  **normalized throughput** is the sum over its jobs (1.0 = one job alone's work; exclusive runs: the mean, about 1).
  **Epoch-time growth** of a job: baseline rate over its rate (an epoch is a fixed number of images).
- **Fairness** of a run whose jobs shared the device: Jain's index over its jobs' relative throughputs x_i,
  J = (sum x)^2 / (n sum x^2) (`fairness.jain_index`): 1 when every job kept the same share of its lone speed, 1/n
  when one job had it all. A job's **slowdown** is its epoch-time growth (lone images/s over its images/s). The
  spread between identical jobs of one run is fairness, not noise: noise is judged from repeats of a cell and the
  baseline's CI.
- **Asked vs had**: a job's configured share of the device (an MPS active thread percentage, a MIG profile's SMs over
  the card's) beside the share it had, read from its throughput: its relative throughput (see `fairness`
  for why not from NVML).
- **Confidence intervals** (95 %, Student's t): over repeats where a figure has several; within a single run over the
  window cut into equal slices (one per `interval_s`), which treats the slices as independent, so it is a lower bound
  on the run-to-run spread. A ratio's relative half-width is the root sum of squares of its parts'. A figure whose
  half-width exceeds `WIDE_CI` (3 %) of it is flagged.
- **bound_by** (see `bound_by`): input / host / memory / gpu from the job's input wait, the GPU's idle time and SM and
  DRAM activity; `cpu` for jobs trained on the CPU.
- **Latency** of an inference job (`role: serve`): per request from arrival to result, over the requests that
  arrived in the window; p50/p95/p99 nearest-rank with order-statistic 95 % CIs, requests/s, share within the SLO,
  p99 over its lone p99, starved jobs named: the rules in words and their code are `latency`'s (a sibling module).
- **Is it the GPU or the host?** Every gain of a collocated cell is split against three lone baselines (as
  configured, host-matched: N x the loader workers, GPU only: synthetic data): `study_gain` = `gpu_part` x
  `host_part`, and `gpu_only_gain` beside them; the rules are `colloc_kit.analysis.attribution`'s.
- **Memory fit**: copies that fit = floor(capacity x (1 - `MEMORY_MARGIN`) / steady footprint), where the steady
  footprint is the job's device memory as NVML reports it per process (its CUDA context included), the median over its
  window, not torch's transient peak (cuDNN autotuning workspaces included).

    >>> from colloc_kit.analysis import figures
    >>> stream = [{"type": "interval", "t": 2.0, "interval_s": 1.0, "interval_images": 100, "warmup": False}]
    >>> window = figures.common_window({"j0": stream})
    >>> (window.start, window.end), figures.window_rate(stream, window)
    ((1.0, 2.0), 100.0)
    >>> figures.ci95([100.0, 102.0, 98.0])
    (100.0, 4.968...)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from colloc_kit import events
from colloc_kit.stats import ci95, plus_minus
from colloc_kit.statuses import COMPLETE

if TYPE_CHECKING:
    import pandas as pd

    from colloc_kit.monitor.store import Samples

__all__ = ["HOST_BOUND_IDLE_SHARE", "HOST_BOUND_SM_ACTIVE_PCT", "HOST_FIGURES", "INPUT_BOUND_SHARE",
           "MEMORY_BOUND_DRAM_PCT", "MEMORY_MARGIN", "MIN_WINDOW_S", "WIDE_CI", "Window", "bound_by", "common_window",
           "copies_fit", "gpu_summary", "input_wait_share", "interval_rates", "of_run", "relative_ci",
           "run_flags", "run_throughput", "slice_rates", "steady_intervals", "steady_span", "wide", "window_images",
           "window_rate"]

MIN_WINDOW_S = 2.0  # a shorter common window is flagged
WIDE_CI = 0.03  # a figure whose 95 % CI half-width is wider than +-3 % of it is flagged
INPUT_BOUND_SHARE = 0.2  # the job waited for input at least this share of its measured time
HOST_BOUND_IDLE_SHARE = 0.2  # the GPU ran no kernel at least this share of the time
HOST_BOUND_SM_ACTIVE_PCT = 40.0  # or its SMs were active less than this (kernels too small to fill it)
MEMORY_BOUND_DRAM_PCT = 60.0  # DRAM bandwidth at least this busy while the GPU was busy
MEMORY_MARGIN = 0.05  # share of a memory capacity kept free when counting copies that fit
HOST_FIGURES = ("cpu_util_pct", "cpu_steal_pct", "cpu_freq_mhz")  # recorded per run: what can swing a lone job


@dataclass(frozen=True)
class Window:
    """The common window of a run's jobs (kit clock seconds), or why there is none (`start` is None)."""

    start: float | None
    end: float | None
    note: str | None = None  # why there is no window, or what is wrong with it

    @property
    def seconds(self) -> float:
        """Its length; 0.0 without a start or an end (a run killed before it wrote its end)."""
        return self.end - self.start if self.start is not None and self.end is not None else 0.0

    def __bool__(self) -> bool:
        return self.start is not None

    def bounds(self) -> tuple[float, float]:
        """(start, end) of a window that has both: check the window (`if window`, `seconds`) first."""
        assert self.start is not None and self.end is not None, self.note
        return self.start, self.end


def steady_intervals(stream: Sequence[dict], held: bool = True) -> list[dict]:
    """A job's interval events after warm-up; `held=False` keeps only its measured window (its own budget)."""
    return [e for e in stream if e.get("type") == events.INTERVAL and not e.get("warmup")
            and (held or not e.get("held"))]


def steady_span(stream: Sequence[dict], held: bool = True) -> tuple[float, float] | None:
    """(start, end) of a job's steady intervals, or None if it had none."""
    steady = steady_intervals(stream, held)
    return (steady[0]["t"] - steady[0]["interval_s"], steady[-1]["t"]) if steady else None


def common_window(streams: Mapping[str, Sequence[dict]]) -> Window:
    """The span in which every job that reached steady state was inside its measured window (the module's rules)."""
    spans = {job: steady_span(stream, held=False) for job, stream in streams.items()}
    steady = {job: span for job, span in spans.items() if span}
    never = sorted(job for job, span in spans.items() if not span)
    left_out = f"; {', '.join(never)} never reached steady state" if never else ""
    if not steady:
        return Window(None, None, "no job reached steady state")
    start, end = max(s for s, _ in steady.values()), min(e for _, e in steady.values())
    if end <= start:
        first = min(steady, key=lambda job: steady[job][1])
        last = max(steady, key=lambda job: steady[job][0])
        return Window(None, None, f"no common window: {first} stopped before {last} reached steady state{left_out}")
    short = f"common window only {end - start:.1f} s (< {MIN_WINDOW_S:g} s)" if end - start < MIN_WINDOW_S else None
    note = "; ".join(n for n in (short, left_out.lstrip("; ")) if n) or None
    return Window(start, end, note)


def window_images(stream: Sequence[dict], start: float, end: float) -> float:
    """Images a job trained between `start` and `end`: its steady intervals, pro rata where they straddle an edge."""
    total = 0.0
    for e in steady_intervals(stream):
        a, b = e["t"] - e["interval_s"], e["t"]
        overlap = min(b, end) - max(a, start)
        if overlap > 0 and b > a:
            total += e["interval_images"] * overlap / (b - a)
    return total


def window_rate(stream: Sequence[dict], window: Window) -> float | None:
    """A job's images/s inside the common window (None without a window or steady intervals in it)."""
    if not window:
        return None
    images = window_images(stream, *window.bounds())
    return images / window.seconds if images > 0 else None


def slice_rates(streams: Iterable[Sequence[dict]], window: Window, slice_s: float) -> list[float]:
    """The jobs' summed images/s in equal slices of the window, each about `slice_s` long (for a within-run CI)."""
    streams = list(streams)
    n = max(1, round(window.seconds / slice_s))
    start, _ = window.bounds()
    edges = [start + window.seconds * i / n for i in range(n + 1)]
    return [sum(window_images(s, a, b) for s in streams) / (b - a) for a, b in zip(edges, edges[1:])]


def interval_rates(stream: Sequence[dict]) -> list[float]:
    """Images/s of each interval of a job's measured window (for the CI of a job alone)."""
    return [e["interval_images"] / e["interval_s"] for e in steady_intervals(stream, held=False) if e["interval_s"] > 0]


def relative_ci(*parts: tuple[float, float]) -> float:
    """Relative half-width of a product or ratio of (value, half-width) parts: root sum of squares (first order)."""
    return math.sqrt(sum((hw / value) ** 2 for value, hw in parts if value)) if parts else math.nan


def wide(value: float, half_width: float) -> bool:
    """True when a figure's CI is wider than +-WIDE_CI of it (or unknown: NaN counts as not wide)."""
    return bool(value) and not math.isnan(half_width) and half_width / abs(value) > WIDE_CI


def run_throughput(streams: Mapping[str, Sequence[dict]], statuses: Mapping[str, str], sequential: bool,
                   slice_s: float = 1.0) -> dict:
    """A run's aggregate images/s with its CI, how it was measured, the window and every job's rate in it.

    Returns aggregate_images_per_s, aggregate_images_per_s_ci (95 % half-width), throughput_window
    (overlap / sequential / alone / own), window_start, window_end, window_s, window_note, and job_rates {job: rate}.
    """
    out: dict[str, Any] = {"aggregate_images_per_s": None, "aggregate_images_per_s_ci": None,
                           "throughput_window": None, "window_start": None, "window_end": None, "window_s": None,
                           "window_note": None, "job_rates": {}}
    complete = [job for job, status in statuses.items() if status == COMPLETE]
    if sequential or len(streams) == 1:  # each job alone: its own measured window, held steps left out
        measured = {job: steady_intervals(streams[job], held=False) for job in complete}
        seconds = sum(e["interval_s"] for ivs in measured.values() for e in ivs)
        if seconds > 0:
            images = sum(e["interval_images"] for ivs in measured.values() for e in ivs)
            rates = [r for job in complete for r in interval_rates(streams[job])]
            out.update(aggregate_images_per_s=images / seconds, aggregate_images_per_s_ci=ci95(rates)[1],
                       throughput_window="sequential" if sequential else "alone", window_s=seconds)
        return out
    window = common_window(streams)
    out["window_note"] = window.note
    if window:
        job_rates = {job: window_rate(stream, window) for job, stream in streams.items()}
        out.update(aggregate_images_per_s=sum(r for r in job_rates.values() if r), throughput_window="overlap",
                   aggregate_images_per_s_ci=ci95(slice_rates(streams.values(), window, slice_s))[1],
                   window_start=window.start, window_end=window.end, window_s=window.seconds, job_rates=job_rates)
        return out
    own = [steady_intervals(streams[job], held=False) for job in complete]
    own_rates = [sum(e["interval_images"] for e in ivs) / sum(e["interval_s"] for e in ivs) for ivs in own if ivs]
    if own_rates:
        out.update(aggregate_images_per_s=sum(own_rates), throughput_window="own")
    return out


def run_flags(summary: dict, n_jobs: int, n_complete: int) -> str | None:
    """Plain words for what makes a run's figures less than comparable, or None: every table and figure shows them."""
    flags = []
    if summary.get("throughput_window") == "own":
        flags.append(f"not comparable: the jobs' own windows were added up ({summary.get('window_note')})")
    elif summary.get("window_note"):
        flags.append(summary["window_note"])
    if n_complete < n_jobs:
        flags.append(f"{n_jobs - n_complete} of {n_jobs} jobs did not complete")
    value, hw = summary.get("aggregate_images_per_s"), summary.get("aggregate_images_per_s_ci")
    if value and hw is not None and wide(value, hw):
        flags.append(f"wide CI ({plus_minus(hw / value, 1)})")
    return "; ".join(flags) or None


def input_wait_share(stream: Sequence[dict]) -> float | None:
    """Share of a job's measured time spent waiting for its next batch (the input pipeline)."""
    measured = steady_intervals(stream, held=False)
    seconds = sum(e["interval_s"] for e in measured)
    return sum(e.get("data_wait_s", 0.0) for e in measured) / seconds if seconds > 0 else None


def bound_by(device: str, input_wait: float | None, gpu_idle: float | None, sm_active_pct: float | None,
             dram_pct: float | None) -> str | None:
    """What limits a job: `input` (it waits for data), `host` (the GPU waits for the host: idle, or its SMs mostly
    unused by small kernels launched one by one), `memory` (DRAM bandwidth), `gpu` (the GPU's compute); `cpu` for a
    job trained on the CPU; None where the figures are missing. Thresholds: the module's *_BOUND_* constants.

    >>> bound_by("cuda", input_wait=0.02, gpu_idle=0.45, sm_active_pct=None, dram_pct=None)
    'host'
    """
    if input_wait is not None and input_wait >= INPUT_BOUND_SHARE:
        return "input"
    if device == "cpu":
        return "cpu" if input_wait is not None else None
    if gpu_idle is None and sm_active_pct is None:
        return None
    if (gpu_idle is not None and gpu_idle >= HOST_BOUND_IDLE_SHARE) or (
            sm_active_pct is not None and sm_active_pct < HOST_BOUND_SM_ACTIVE_PCT):
        return "host"
    if dram_pct is not None and dram_pct >= MEMORY_BOUND_DRAM_PCT:
        return "memory"
    return "gpu"


def copies_fit(capacity_mb: float, footprint_mb: float | None) -> int | None:
    """How many copies of a job with this steady footprint fit in `capacity_mb`, keeping MEMORY_MARGIN free.

    >>> copies_fit(81559, 2100.0)
    36
    """
    if not footprint_mb or footprint_mb <= 0 or math.isnan(footprint_mb):
        return None
    return int(capacity_mb * (1 - MEMORY_MARGIN) // footprint_mb)


def of_run(streams: Mapping[str, Sequence[dict]], statuses: Mapping[str, str], devices: Mapping[str, str],
           samples: Samples, sequential: bool, slice_s: float = 1.0,
           span: tuple[float | None, float | None] = (None, None)) -> dict[str, Any]:
    """Every figure of one run in one pass, from its jobs' events, statuses and devices and the monitor's samples
    (`slice_s`: the slices of its within-run CI; `span`: the run's start and end, for the host's figures where it had
    no common window): `run_throughput`'s figures but `job_rates`, `window`, `flags`, `bound_by` (its jobs' verdict
    where they agree, else 'mixed: ...'), `host`, `spans` (each job's measured window) and, per job in `jobs`, the
    fields of `records.JobFigures` but `latency`. The rates and CIs first, the monitor's summaries, then verdicts."""
    from colloc_kit.monitor.summary import summarize  # noqa: PLC0415 - pandas only where a run is read

    throughput = run_throughput(streams, statuses, sequential, slice_s)
    rates: dict[str, float] = throughput.pop("job_rates")
    window = Window(throughput["window_start"], throughput["window_end"])
    spans = {job: steady_span(stream, held=False) for job, stream in streams.items()}
    jobs: dict[str, dict[str, Any]] = {
        job: {"images_per_s": _reported_rate(stream), "images_per_s_overlap": rates.get(job),
              "images_per_s_ci": ci95(interval_rates(stream))[1], "input_wait_share": input_wait_share(stream)}
        for job, stream in streams.items()}
    flags = run_flags(throughput, len(streams), sum(status == COMPLETE for status in statuses.values()))
    alone_in_turn = sequential or len(streams) == 1  # each job measured on its own window
    monitored = len(samples.gpu) > 0
    shared = gpu_summary(samples.gpu, window, streams.values()) if monitored and window else {}  # one for all jobs
    for job, stream in streams.items():
        span_own = spans[job] if alone_in_turn and jobs[job]["images_per_s"] else None
        own = Window(*span_own) if span_own else None
        monitor = gpu_summary(samples.gpu, own, [stream]) if monitored and own else shared
        jobs[job].update(monitor=monitor, steady_gpu_memory_mb=_steady_memory(samples.process, job, own or window),
                         **_verdict(devices[job], jobs[job]["input_wait_share"], monitor))
    run_span = window or Window(*span)
    host = summarize(samples.host, *run_span.bounds()) if len(samples.host) and run_span.seconds > 0 else {}
    verdicts: list[str] = sorted({job["bound_by"] for job in jobs.values() if job["bound_by"]})
    return {**throughput, "window": window, "flags": flags, "spans": spans, "jobs": jobs,
            "bound_by": verdicts[0] if len(verdicts) == 1 else ("mixed: " + ", ".join(verdicts) if verdicts else None),
            "host": {f"host_{k}_mean": host.get(f"{k}_mean") for k in HOST_FIGURES}}


def gpu_summary(gpu_samples: pd.DataFrame, window: Window, streams: Iterable[Sequence[dict]]) -> dict:
    """The monitor's figures over `window`, and the energy per image the given jobs trained in it."""
    from colloc_kit.monitor.summary import summarize  # noqa: PLC0415 - pandas only where a run is read

    start, end = window.bounds()
    found = summarize(gpu_samples, start, end)
    images = sum(window_images(stream, start, end) for stream in streams)
    energy_j = found.get("energy_j")
    found["energy_per_image_j"] = energy_j / images if energy_j and images else None
    return found


def _reported_rate(stream: Sequence[dict]) -> float | None:
    """The images/s a job reported for its measured window (its `measured` event, else its `end`)."""
    last = {e["type"]: e for e in stream}
    return (last.get(events.MEASURED) or last.get(events.END) or {}).get("images_per_s")


def _verdict(device: str, input_wait: float | None, monitor: Mapping[str, Any]) -> dict[str, Any]:
    """A job's GPU idle share and `bound_by`, from its input wait and the monitor's figures over its window."""
    util = monitor.get("gpu_util_pct_mean")
    idle = None if util is None else max(0.0, 1 - util / 100)
    verdict = bound_by(device, input_wait, idle, monitor.get("sm_util_pct_mean"), monitor.get("dram_bw_util_pct_mean"))
    return {"gpu_idle_share": idle, "bound_by": verdict}


def _steady_memory(process_samples: pd.DataFrame, job: str, window: Window | None) -> float | None:
    """Median device memory NVML reports for the job's processes inside its window (summed over its processes)."""
    if not window or process_samples.empty or "job" not in process_samples:
        return None
    rows = process_samples[(process_samples["job"] == job) & process_samples["t"].between(window.start, window.end)]
    per_sample = rows.groupby("t")["gpu_mem_used_mb"].sum(min_count=1).dropna()
    return float(per_sample.median()) if len(per_sample) else None
