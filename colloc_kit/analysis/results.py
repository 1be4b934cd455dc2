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
from colloc_kit.analysis import fairness, latency, records
from colloc_kit.analysis.lone import with_baselines
from colloc_kit.analysis.records import JobFigures, JobRow
from colloc_kit.errors import BadInput, BrokenRun
from colloc_kit.paths import absolute, shown
from colloc_kit.monitor import Samples, read_samples
from colloc_kit.statuses import COMPLETE, RUNNING
from colloc_kit.store.manifest import JobEntry, JobOutcome, Manifest, SlotRecord
from colloc_kit.store.rundir import RunDir, effective_status, find_runs, read_events

__all__ = ["Results", "RunReading", "assemble", "combine", "derive", "job_record", "load", "read_run"]


class RunReading(NamedTuple):
    """One run as `read_run` reads it: its job rows, its epoch rows, its summary row, the monitor's samples, and the
    run's files that are gone (a finished job's event log: its figures cannot be computed)."""

    jobs: list[dict]
    epochs: list[dict]
    summary: dict
    samples: Samples
    lost: tuple[str, ...] = ()


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
    derived_frames: tuple = field(default=(), repr=False, compare=False)  # (jobs, runs) as `derive` made them

    @property
    def derived(self) -> bool:
        """Whether `.jobs` and `.runs` are the frames `derive` made (baselines, shares, fairness joined), not frames
        put in their place since (a subset, a frame made by hand): `analysis` then reads what `derive` joined."""
        made = self.derived_frames
        return len(made) == 2 and made[0] is self.jobs and made[1] is self.runs

    def skipped(self) -> list[str]:
        """What `load` skipped or read in part, one sentence each, for every reader to name (`cli.skipped`).

        >>> Results(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), broken={"runs/x": "torn"}).skipped()
        ['skipped the broken run runs/x: torn']
        """
        return [*(f"skipped the broken run {shown(run)}: {problem}" for run, problem in self.broken.items()),
                *(f"the run {shown(run)} is read in part: {problem}" for run, problem in self.damaged.items())]

    def of_experiments(self, names: list[str]) -> "Results":
        """Only the runs of the named experiments."""
        return self.of_runs(set(self.runs["run_id"][self.runs["experiment"].isin(names)]) if len(self.runs) else set())

    def of_runs(self, keep: set[str]) -> "Results":
        """Only the runs whose `run_id` is in `keep`."""
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
    those samples, and its damaged files named in `.damaged` (and in its row's `problems`). A path that does not
    exist is refused (BadInput), not read as no runs.

    >>> results = load("runs")                                           # doctest: +SKIP
    >>> results.broken                                                   # doctest: +SKIP
    {'runs/exp/20250101-120000-naive-x2-r0': 'runs/exp/.../manifest.json cannot be read as JSON (...)'}
    """
    folders = [absolute(p) for p in (path if isinstance(path, list) else [path])]
    missing = [p for p in folders if not p.exists()]
    if missing:
        raise BadInput(f"{shown(missing[0])} does not exist; give a run directory or a folder of runs that `colloc-kit "
                       "run` wrote, e.g. colloc_kit.load('runs')")
    readings, broken = [], {}
    for run in (run for p in folders for run in find_runs(p)):
        try:
            readings.append(read_run(run))
        except (OSError, ValueError, BrokenRun) as exc:  # ValueError: JSON, Unicode and Arrow (Parquet) errors
            problem = str(exc) if isinstance(exc, BrokenRun) else f"{type(exc).__name__}: {str(exc)[:300]}"
            if strict:
                raise BrokenRun(f"the run {run.path} is broken: {problem}; move it away or "
                                "load(..., strict=False)", path=run.path) from None
            broken[str(run.path)] = problem
    results = assemble(readings)
    results.broken = broken
    return results


def combine(parts: list[Results]) -> Results:
    """One Results of several, e.g. a notebook's experiments, for `analysis.summarize`. A run in several parts counts
    once, as the last part has it (a re-run's Results hold the earlier runs of its experiment too: the panel's)."""
    unique: list[Results] = []
    later: set[str] = set()
    for part in reversed(parts):
        ids = set(part.runs["run_id"]) if "run_id" in part.runs else set()
        unique.insert(0, part.of_runs(ids - later) if ids & later else part)
        later |= ids
    frames = {name: _concat([getattr(part, name) for part in unique])
              for name in ("jobs", "epochs", "runs", "samples", "host_samples")}
    return derive(Results(**frames, broken={k: v for part in parts for k, v in part.broken.items()},
                          damaged={k: v for part in parts for k, v in part.damaged.items()}))


def assemble(readings: list[RunReading]) -> Results:
    """Results from runs already read by `read_run` (an experiment reads each run as it ends)."""
    job_rows, epoch_rows, run_rows, gpu_frames, host_frames = [], [], [], [], []
    for jobs, epochs, summary, samples, _ in readings:
        job_rows += jobs
        epoch_rows += epochs
        run_rows.append(summary)
        gpu_frames.append(samples.gpu.assign(run_id=summary["run_id"]))
        host_frames.append(samples.host.assign(run_id=summary["run_id"]))
    return derive(Results(jobs=pd.DataFrame(job_rows), epochs=pd.DataFrame(epoch_rows), runs=pd.DataFrame(run_rows),
                          samples=_concat(gpu_frames), host_samples=_concat(host_frames),
                          damaged={r.summary["run_dir"]: "; ".join([*r.lost, *r.samples.problems])
                                   for r in readings if r.lost or r.samples.problems}))


def derive(results: Results) -> Results:
    """`results` with what is measured against each experiment's own lone runs: every job's baseline, relative
    throughput, slowdown (`epoch_time_growth`, `lone.with_baselines`) and shares asked and had, every run's
    fairness (`colloc_kit.analysis.fairness`). `load`, `combine` and `reference.load` call it; columns already there are
    computed afresh (a subset or a union of experiments gives the same figures)."""
    jobs = fairness.with_shares(with_baselines(results.jobs)) if len(results.jobs) else results.jobs
    jobs = latency.with_lone_latency(jobs)
    runs = results.runs.drop(columns=[*fairness.RUN_COLUMNS, *latency.RUN_COLUMNS], errors="ignore")
    if len(runs) and len(jobs):
        runs = runs.merge(fairness.per_run(jobs), on="run_id", how="left").merge(latency.per_run(jobs), on="run_id",
                                                                                  how="left")
    return replace(results, jobs=jobs, runs=runs, derived_frames=(jobs, runs))


def read_run(run: RunDir) -> RunReading:
    """Rows for one run: its jobs, its epochs, its summary, and the monitor's samples. It gathers (the manifest, each
    job's events and outcome, the monitor's samples), computes every figure in one call (`records.run_figures`) and
    makes the rows of the records it returns."""
    manifest = run.read_manifest()
    status = effective_status(manifest).value
    base = _run_columns(run, manifest)
    entries = manifest.jobs
    streams = {entry.job: read_events(run.events_path(entry.job)) for entry in entries}
    outcomes = {entry.job: entry.outcome or _outcome_from_events(entry.job, streams[entry.job], status == RUNNING)
                for entry in entries}
    lost = tuple(f"{run.events_path(entry.job).name} is missing: {entry.job}'s figures cannot be computed"
                 for entry in entries if _finished(entry, status) and not run.events_path(entry.job).exists())
    samples = read_samples(run.path)
    run_figures = records.run_figures(
        streams, {job: outcome.status.value for job, outcome in outcomes.items()},
        {entry.job: entry.spec["device"] for entry in entries}, samples, manifest.sequential,
        slice_s=min((e.spec["interval_s"] for e in entries if e.spec.get("interval_s")), default=1.0),
        span=(manifest.started_at, manifest.ended_at))
    where = {"run_status": status, "run_dir": str(run.path)}
    jobs = [job_record(entry, streams[entry.job], outcomes[entry.job], run_figures.jobs[entry.job])
            .row(base, where, run_figures.jobs[entry.job]) for entry in entries]
    serving = latency.run_latency(streams, {e.job: e.spec for e in entries}, run_figures.window,
                                  manifest.sequential or len(entries) == 1)  # an inference job's latency figures
    jobs = [{**row, **serving[row["job"]]} for row in jobs]
    epochs = [{**base, "job": job, "epoch": e["epoch"], "epoch_time_s": e.get("epoch_time_s"),
               "images": e.get("images"), "images_per_s": e.get("images_per_s"), "t": e["t"]}
              for job, stream in streams.items() for e in stream if e["type"] == events.EPOCH]
    summary = {**base, "status": status, "n_jobs": len(jobs), "n_complete": sum(r["status"] == COMPLETE for r in jobs),
               **run_figures.summary(), "flags": run_figures.flags, "bound_by": run_figures.bound_by,
               **run_figures.host, "problems": "; ".join([*manifest.problems, *lost, *samples.problems]) or None,
               "started_at": manifest.started_at, "ended_at": manifest.ended_at, "run_dir": str(run.path)}
    return RunReading(jobs, epochs, summary, samples, lost)


def _finished(entry: JobEntry, run_status: str) -> bool:
    """Whether a job ended complete, by its manifest (its outcome, else its run's status): its event log must be
    there."""
    return entry.outcome.status.value == COMPLETE if entry.outcome else run_status == COMPLETE


def _run_columns(run: RunDir, manifest: Manifest) -> dict:
    """The columns every row of a run starts with: which run it is, its mode, copies and repeat, where it ran."""
    return {"run_id": run.run_id, "experiment": manifest.experiment, "mode": manifest.mode.name,
            "mode_label": manifest.mode.label, "copies": manifest.copies, "repeat": manifest.repeat,
            "sequential": manifest.sequential, "alone": manifest.is_alone,
            "placement": manifest.placement or "pinned",  # None: an older kit's, which pinned every job
            "cell_id": manifest.cell_id, "host": manifest.machine.hostname, "gpu": manifest.gpu,
            "gpu_name": manifest.machine.gpu_name, "host_cpu_s": manifest.host_cpu.cpu_s,
            "warm_window": manifest.warm.window if manifest.warm else None}  # a warm launch's window (0: its first)


def job_record(entry: JobEntry, stream: list[dict], outcome: JobOutcome, job_figures: JobFigures) -> JobRow:
    """One job's record from its manifest entry (spec, slot), its outcome, its events and its figures."""
    last = {e["type"]: e for e in stream}
    end, ready, error = last.get(events.END, {}), last.get(events.READY, {}), last.get(events.ERROR, {})
    window = last.get(events.MEASURED) or end  # the measured window's figures (a job that failed after it has them)
    spec = entry.spec
    slot = entry.slot or SlotRecord()  # none until the mode handed out slots
    epoch_times = [e["epoch_time_s"] for e in stream if e["type"] == events.EPOCH and e.get("epoch_time_s")]
    gpu_peak, rate = end.get("peak_allocated_mb"), job_figures.images_per_s
    return JobRow(
        job=entry.job, group=entry.group, slot_label=slot.label,
        model=spec["model"], dataset=spec["dataset"], data_root=spec.get("data_root"),
        batch_size=spec["batch_size"], amp=spec["amp"], cudnn_autotune=spec.get("cudnn_autotune", "study"),
        recipe=spec.get("recipe", "kit"), image_size=ready.get("image_size", spec.get("image_size")),
        dataset_label=ready.get("dataset_label"), device=spec["device"], interval_s=spec.get("interval_s"),
        workers=spec.get("workers"), cores_allowed=len(outcome.cores) if outcome.cores else None,
        cores_used=len(outcome.cores_ran_on) if outcome.cores_ran_on else None,
        status=outcome.status.value,
        error_kind=outcome.error_kind, error=outcome.error or error.get("message"),
        exit_code=outcome.exit_code, mode_problem=outcome.mode_problem,
        images_per_s=rate, images_per_s_ci=job_figures.images_per_s_ci,
        epoch_time_s=_epoch_time(epoch_times), step_time_s=spec["batch_size"] / rate if rate else None,
        steady_s=window.get("steady_s"), window_ended_by=outcome.window_ended_by, held_s=end.get("held_s"),
        steps=end.get("steps"), images=end.get("images"),
        input_wait_share=job_figures.input_wait_share,
        peak_memory_mb=gpu_peak if gpu_peak is not None else end.get("peak_rss_mb"),
        peak_gpu_allocated_mb=gpu_peak, peak_gpu_reserved_mb=end.get("peak_reserved_mb"),
        peak_host_rss_mb=end.get("peak_rss_mb"),
        launched_at=ready.get("launched_at"), imports_s=ready.get("imports_s"), build_s=ready.get("build_s"),
        primed_s=ready.get("primed_s"), ready_at=ready.get("t"), started_at=last.get(events.START, {}).get("t"),
        ended_at=end.get("t"), slot_info=dict(slot.info or {}))


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _epoch_time(times: list[float]) -> float | None:
    """Mean epoch time, leaving out the first epoch (it holds the warm-up) when there are later ones."""
    if not times:
        return None
    later = times[1:] or times
    return sum(later) / len(later)


def _outcome_from_events(job: str, stream: list[dict], run_live: bool = False) -> JobOutcome:
    """A job's outcome from its last events (`events.job_outcome`, unwatched), for a manifest that has none (a run
    killed before it ended, or one still under way: `run_live`, where a job that has not ended is running)."""
    last = {e["type"]: e for e in stream}
    if run_live and events.END not in last and events.ERROR not in last:
        return JobOutcome(job, RUNNING)
    status, error_kind, error = events.job_outcome(last, watched=False)
    return JobOutcome(job, status, error_kind=error_kind, error=error)
