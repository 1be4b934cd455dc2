"""Read run directories into tidy pandas frames: `.jobs`, `.epochs`, `.runs` (and `.samples` from the monitor).

Everything is derived from the manifests and the raw event logs, so analysis can re-cut windows later and a run
killed half-way is still read (its status says so).

    >>> results = load("runs/demo")                                      # doctest: +SKIP
    >>> results.runs[["mode", "copies", "aggregate_images_per_s", "flags"]]  # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s", "images_per_s_overlap", "bound_by"]] # doctest: +SKIP
    >>> results.jobs[["job", "sm_occupancy_pct_mean", "energy_per_image_j", "steady_gpu_memory_mb"]] # doctest: +SKIP
    >>> results.runs[["mode", "copies", "fairness_index", "slowdowns", "least_served"]]  # doctest: +SKIP

The figures (common window, aggregate throughput, CIs, `bound_by`, flags) are defined in `figures`; this
module only gathers their inputs. A job's `images_per_s` is over its own measured window (its budget, after warm-up);
`images_per_s_overlap` over the run's common window; a run's `aggregate_images_per_s` is
`figures.run_throughput`'s, with `aggregate_images_per_s_ci` (95 % half-width) and `flags` (why a figure is not
comparable, or None).

Figures measured against lone runs are joined by `derive`, from each experiment's own lone runs: every job's
baseline, `relative_throughput` and slowdown (`epoch_time_growth`), and its configured share of the device beside the
share it had (`share_asked_pct`, `share_had_pct`); every run's `fairness_index` (Jain's), `slowdown_min/_max`,
`slowdowns` (each job's), `least_served` and `fairness_note` (`colloc_kit.analysis.fairness`).

GPU metrics (the monitor's samples) are summarised over each job's measurement window (the common window of the
run's jobs, or the job's own measured window when it ran alone) and joined onto its row: `<metric>_mean/_p50/_p95`,
`energy_j` and `energy_per_image_j` (the window's energy over all images the device trained in it), and the job's
steady device memory `steady_gpu_memory_mb` (NVML, per process, its CUDA context included).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from colloc_kit import events
from colloc_kit.analysis import fairness, figures
from colloc_kit.analysis.lone import with_baselines
from colloc_kit.errors import BrokenRun
from colloc_kit.monitor import Samples, read_samples, summarize
from colloc_kit.statuses import COMPLETE, FAILED, INTERRUPTED
from colloc_kit.store.manifest import JobEntry, JobOutcome, SlotRecord
from colloc_kit.store.rundir import RunDir, effective_status, find_runs, read_events

HOST_FIGURES = ("cpu_util_pct", "cpu_steal_pct", "cpu_freq_mhz")  # recorded per run: what can swing a lone job


class RunReading(NamedTuple):
    """One run as `read_run` reads it: its job rows, its epoch rows, its summary row and the monitor's samples."""

    jobs: list[dict]
    epochs: list[dict]
    summary: dict
    samples: Samples


@dataclass
class Results:
    """Tidy frames of one or more runs. Column names carry units (`_s`, `_mb`, `_per_s`, `_pct`, `_j`)."""

    jobs: pd.DataFrame
    epochs: pd.DataFrame
    runs: pd.DataFrame
    samples: pd.DataFrame = field(default_factory=pd.DataFrame)  # GPU time series, one row per sample per run
    host_samples: pd.DataFrame = field(default_factory=pd.DataFrame)  # host CPU and memory series
    broken: dict[str, str] = field(default_factory=dict)  # run directory -> what is wrong with it (load skipped it)
    damaged: dict[str, str] = field(default_factory=dict)  # run directory -> its damaged files (read without them)

    def of_experiments(self, names: list[str]) -> "Results":
        """Only the runs of the named experiments."""
        keep = set(self.runs["run_id"][self.runs["experiment"].isin(names)]) if len(self.runs) else set()
        return Results(*(frame[frame["run_id"].isin(keep)] if "run_id" in frame else frame
                         for frame in (self.jobs, self.epochs, self.runs, self.samples, self.host_samples)))

    def __repr__(self) -> str:
        return (f"Results({len(self.runs)} runs, {len(self.jobs)} jobs, {len(self.epochs)} epochs, "
                f"{len(self.samples)} samples)")


def load(path: str | Path | list, strict: bool = False) -> Results:
    """Read one run directory, a folder of them (searched recursively), or a list of either.

    A broken run (a torn manifest, an unreadable event log) is skipped and named with what is wrong in `.broken`,
    so that the good runs beside it are still read; `strict=True` raises BrokenRun at the first one instead. A run
    whose monitor files are damaged (a garbage Parquet or monitor.json file) is read with its jobs' results, without
    those samples, and its damaged files named in `.damaged` (and in its row's `problems`).

    >>> results = load("runs")                                           # doctest: +SKIP
    >>> results.broken                                                   # doctest: +SKIP
    {'runs/exp/20250101-120000-naive-x2-r0': 'runs/exp/.../manifest.json cannot be read as JSON (...)'}
    """
    paths = path if isinstance(path, list) else [path]
    readings, broken = [], {}
    for run in (run for p in paths for run in find_runs(p)):
        try:
            readings.append(read_run(run))
        except (OSError, ValueError, BrokenRun) as exc:  # ValueError: JSON, Unicode and Arrow (Parquet) errors
            problem = str(exc) if isinstance(exc, BrokenRun) else f"{type(exc).__name__}: {str(exc)[:300]}"
            if strict:
                raise BrokenRun(f"the run {run.path} is broken: {problem}; move it away or "
                                "load(..., strict=False)") from None
            broken[str(run.path)] = problem
    results = assemble(readings)
    results.broken = broken
    return results


def combine(parts: list[Results]) -> Results:
    """One Results of several, e.g. a notebook's experiments, for `analysis.summarize`."""
    frames = {name: _concat([getattr(part, name) for part in parts])
              for name in ("jobs", "epochs", "runs", "samples", "host_samples")}
    return derive(Results(**frames, broken={k: v for part in parts for k, v in part.broken.items()},
                          damaged={k: v for part in parts for k, v in part.damaged.items()}))


def assemble(readings: list[RunReading]) -> Results:
    """Results from runs already read by `read_run` (an experiment reads each run as it ends)."""
    job_rows, epoch_rows, run_rows, gpu_frames, host_frames = [], [], [], [], []
    for jobs, epochs, summary, samples in readings:
        job_rows += jobs
        epoch_rows += epochs
        run_rows.append(summary)
        gpu_frames.append(samples.gpu.assign(run_id=summary["run_id"]))
        host_frames.append(samples.host.assign(run_id=summary["run_id"]))
    return derive(Results(jobs=pd.DataFrame(job_rows), epochs=pd.DataFrame(epoch_rows), runs=pd.DataFrame(run_rows),
                          samples=_concat(gpu_frames), host_samples=_concat(host_frames),
                          damaged={r.summary["run_dir"]: "; ".join(r.samples.problems)
                                   for r in readings if r.samples.problems}))


def derive(results: Results) -> Results:
    """`results` with what is measured against each experiment's own lone runs: every job's baseline, relative
    throughput, slowdown (`epoch_time_growth`, `lone.with_baselines`) and shares asked and had, every run's
    fairness (`colloc_kit.analysis.fairness`). `load`, `combine` and `reference.load` call it; columns already there are
    computed afresh (a subset or a union of experiments gives the same figures)."""
    jobs = fairness.with_shares(with_baselines(results.jobs)) if len(results.jobs) else results.jobs
    runs = results.runs.drop(columns=fairness.RUN_COLUMNS, errors="ignore")
    if len(runs) and len(jobs):
        runs = runs.merge(fairness.per_run(jobs), on="run_id", how="left")
    return replace(results, jobs=jobs, runs=runs)


def read_run(run: RunDir) -> RunReading:
    """Rows for one run: its jobs, its epochs, its summary, and the monitor's samples."""
    manifest = run.read_manifest()
    status = effective_status(manifest).value
    entries = manifest.jobs
    base = {"run_id": run.run_id, "experiment": manifest.experiment, "mode": manifest.mode.name,
            "mode_label": manifest.mode.label, "copies": manifest.copies, "repeat": manifest.repeat,
            "sequential": manifest.sequential, "alone": manifest.is_alone,
            "placement": manifest.placement or "pinned",  # None: an older kit's, which pinned every job
            "cell_id": manifest.cell_id, "host": manifest.machine.hostname, "gpu": manifest.gpu,
            "gpu_name": manifest.machine.gpu_name, "host_cpu_s": manifest.host_cpu.cpu_s}
    streams = {entry.job: read_events(run.events_path(entry.job)) for entry in entries}
    jobs = [job_row(entry, streams[entry.job], base) for entry in entries]
    interval_s = min((row["interval_s"] for row in jobs if row["interval_s"]), default=1.0)
    throughput = figures.run_throughput(streams, {row["job"]: row["status"] for row in jobs}, manifest.sequential,
                                        interval_s)
    window = figures.Window(throughput["window_start"], throughput["window_end"])
    samples = read_samples(run.path)
    monitored = len(samples.gpu) > 0
    shared = gpu_summary(samples.gpu, window, streams.values()) if monitored and window else {}  # one for all jobs
    alone_in_turn = manifest.sequential or len(entries) == 1  # each job measured on its own window
    for row in jobs:
        stream = streams[row["job"]]
        alone_window = alone_in_turn and row["images_per_s"]
        span = figures.steady_span(stream, held=False) if alone_window else None
        own = figures.Window(*span) if span else None
        row["images_per_s_overlap"] = throughput["job_rates"].get(row["job"])
        row["run_status"] = status
        row["run_dir"] = str(run.path)
        row.update(gpu_summary(samples.gpu, own, [stream]) if monitored and own else shared)
        row["steady_gpu_memory_mb"] = _steady_memory(samples.process, row["job"], own or window)
        row.update(_why(row))
    epochs = [{**base, "job": job, "epoch": e["epoch"], "epoch_time_s": e.get("epoch_time_s"),
               "images": e.get("images"), "images_per_s": e.get("images_per_s"), "t": e["t"]}
              for job, stream in streams.items() for e in stream if e["type"] == events.EPOCH]
    n_complete = sum(r["status"] == COMPLETE for r in jobs)
    throughput.pop("job_rates")
    run_span = window or figures.Window(manifest.started_at, manifest.ended_at)
    host = summarize(samples.host, *run_span.bounds()) if len(samples.host) and run_span.seconds > 0 else {}
    summary = {**base, "status": status, "n_jobs": len(jobs), "n_complete": n_complete, **throughput,
               "flags": figures.run_flags(throughput, len(jobs), n_complete),
               "bound_by": _run_verdict(jobs), **{f"host_{k}_mean": host.get(f"{k}_mean") for k in HOST_FIGURES},
               "problems": "; ".join([*manifest.problems, *samples.problems]) or None,
               "started_at": manifest.started_at, "ended_at": manifest.ended_at, "run_dir": str(run.path)}
    return RunReading(jobs, epochs, summary, samples)


def job_row(entry: JobEntry, stream: list[dict], base: dict) -> dict:
    """One job's row from its manifest entry (spec, slot, outcome) and its events."""
    last = {e["type"]: e for e in stream}
    end, ready, error = last.get(events.END, {}), last.get(events.READY, {}), last.get(events.ERROR, {})
    window = last.get(events.MEASURED) or end  # the measured window's figures (a job that failed after it has them)
    outcome = entry.outcome or _outcome_from_events(entry.job, last)
    spec = entry.spec
    slot = entry.slot or SlotRecord()  # none until the mode handed out slots
    epoch_times = [e["epoch_time_s"] for e in stream if e["type"] == events.EPOCH and e.get("epoch_time_s")]
    gpu_peak = end.get("peak_allocated_mb")
    row = {
        **base, "job": entry.job, "group": entry.group, "slot_label": slot.label,
        "model": spec["model"], "dataset": spec["dataset"], "data_root": spec.get("data_root"),
        "batch_size": spec["batch_size"], "amp": spec["amp"],
        "recipe": spec.get("recipe", "kit"), "image_size": ready.get("image_size", spec.get("image_size")),
        "dataset_label": ready.get("dataset_label"), "device": spec["device"], "interval_s": spec.get("interval_s"),
        "status": outcome.status.value,
        "error_kind": outcome.error_kind, "error": outcome.error or error.get("message"),
        "exit_code": outcome.exit_code, "mode_problem": outcome.mode_problem,
        "images_per_s": window.get("images_per_s"),
        "images_per_s_ci": figures.ci95(figures.interval_rates(stream))[1],
        "epoch_time_s": _epoch_time(epoch_times),
        "step_time_s": spec["batch_size"] / window["images_per_s"] if window.get("images_per_s") else None,
        "steady_s": window.get("steady_s"), "held_s": end.get("held_s"), "steps": end.get("steps"),
        "images": end.get("images"),
        "input_wait_share": figures.input_wait_share(stream),
        "peak_memory_mb": gpu_peak if gpu_peak is not None else end.get("peak_rss_mb"),
        "peak_gpu_allocated_mb": gpu_peak, "peak_gpu_reserved_mb": end.get("peak_reserved_mb"),
        "peak_host_rss_mb": end.get("peak_rss_mb"),
        "launched_at": ready.get("launched_at"), "imports_s": ready.get("imports_s"), "build_s": ready.get("build_s"),
        "primed_s": ready.get("primed_s"), "ready_at": ready.get("t"),
        "started_at": last.get(events.START, {}).get("t"),
        "ended_at": end.get("t"),
    }
    row.update({f"slot_{k}": v for k, v in (slot.info or {}).items()})
    return row


def gpu_summary(gpu_samples: pd.DataFrame, window: figures.Window, streams) -> dict:
    """The monitor's figures over `window`, and the energy per image the given jobs trained in it."""
    start, end = window.bounds()
    figures_ = summarize(gpu_samples, start, end)
    images = sum(figures.window_images(stream, start, end) for stream in streams)
    energy_j = figures_.get("energy_j")
    figures_["energy_per_image_j"] = energy_j / images if energy_j and images else None
    return figures_


def _why(row: dict) -> dict:
    """The job's GPU idle share and its `bound_by` verdict (figures.bound_by) from its row's figures."""
    util = row.get("gpu_util_pct_mean")
    gpu_idle = None if util is None else max(0.0, 1 - util / 100)
    verdict = figures.bound_by(row["device"], row["input_wait_share"], gpu_idle, row.get("sm_util_pct_mean"),
                               row.get("dram_bw_util_pct_mean"))
    return {"gpu_idle_share": gpu_idle, "bound_by": verdict}


def _run_verdict(jobs: list[dict]) -> str | None:
    """The run's `bound_by`: its jobs' verdict where they agree, else 'mixed: ...'."""
    verdicts = sorted({row["bound_by"] for row in jobs if row["bound_by"]})
    return verdicts[0] if len(verdicts) == 1 else ("mixed: " + ", ".join(verdicts) if verdicts else None)


def _steady_memory(process_samples: pd.DataFrame, job: str, window: figures.Window | None) -> float | None:
    """Median device memory NVML reports for the job's processes inside its window (summed over its processes)."""
    if not window or process_samples.empty or "job" not in process_samples:
        return None
    rows = process_samples[(process_samples["job"] == job) & process_samples["t"].between(window.start, window.end)]
    per_sample = rows.groupby("t")["gpu_mem_used_mb"].sum(min_count=1).dropna()
    return float(per_sample.median()) if len(per_sample) else None


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _epoch_time(times: list[float]) -> float | None:
    """Mean epoch time, leaving out the first epoch (it holds the warm-up) when there are later ones."""
    if not times:
        return None
    later = times[1:] or times
    return sum(later) / len(later)


def _outcome_from_events(job: str, last: dict) -> JobOutcome:
    """A job's outcome from its last events, for a manifest that has none (a run killed before it ended)."""
    if events.END in last:
        return JobOutcome(job, COMPLETE)
    if events.ERROR in last:
        return JobOutcome(job, FAILED, error_kind=last[events.ERROR].get("kind"))
    return JobOutcome(job, INTERRUPTED, error="the run ended before this job reported an outcome")
