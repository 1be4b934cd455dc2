"""Read run directories into tidy pandas frames: `.jobs`, `.epochs`, `.runs` (and `.samples` from the monitor).

Everything is derived from the manifests and the raw event logs, so analysis can re-cut windows later and a run
killed half-way is still read (its status says so).

    >>> results = load("runs/demo")                                      # doctest: +SKIP
    >>> results.runs[["mode", "copies", "aggregate_images_per_s", "flags"]]  # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s", "images_per_s_overlap", "bound_by"]] # doctest: +SKIP
    >>> results.jobs[["job", "sm_occupancy_pct_mean", "energy_per_image_j", "steady_gpu_memory_mb"]] # doctest: +SKIP
    >>> results.runs[["mode", "copies", "fairness_index", "slowdowns", "least_served"]]  # doctest: +SKIP

The figures (common window, aggregate throughput, CIs, `bound_by`, flags) are defined in `figures`; a run is
gathered by the store (`store.rundir.read_streams`), its records made by `records.read`, and this module makes the
frames' rows of them. A job's `images_per_s` is over its own measured window (its budget, after warm-up);
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

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import pandas as pd

from colloc_kit import events
from colloc_kit.analysis import fairness, latency, records
from colloc_kit.analysis.lone import with_baselines
from colloc_kit.analysis.records import JobFigures, JobRow, RunFigures, job_record
from colloc_kit.errors import BadInput, BrokenRun
from colloc_kit.monitor import Samples
from colloc_kit.paths import absolute, shown
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.rundir import RunDir, RunStreams, find_runs, read_streams

__all__ = ["Results", "RunReading", "assemble", "combine", "derive", "job_record", "job_row", "load", "read_run"]


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
    """Rows for one run: its jobs, its epochs, its summary, and the monitor's samples. One trip: the store gathers the
    run (`store.rundir.read_streams`: the manifest, each job's events and outcome, the monitor's samples), the
    analysis makes its records (`records.read`: every figure in one call, a `JobRow` per job), and the rows are made
    here, of those records only (`tests/test_read_walk.py` holds the walk to it)."""
    read = records.read(read_streams(run))
    streams, manifest, run_figures = read.streams, read.streams.manifest, read.figures
    status, base = streams.status.value, _run_columns(streams)
    where = {"run_status": status, "run_dir": str(run.path)}
    jobs = [job_row(read.jobs[entry.job], base, where, run_figures.jobs[entry.job]) for entry in manifest.jobs]
    epochs = [{**base, "job": job, "epoch": e["epoch"], "epoch_time_s": e.get("epoch_time_s"),
               "images": e.get("images"), "images_per_s": e.get("images_per_s"), "t": e["t"]}
              for job, stream in streams.streams.items() for e in stream if e["type"] == events.EPOCH]
    summary = {**base, "status": status, "n_jobs": len(jobs), "n_complete": sum(r["status"] == COMPLETE for r in jobs),
               **{k: getattr(run_figures, k) for k in RunFigures.SUMMARY}, "flags": run_figures.flags,
               "bound_by": run_figures.bound_by, **run_figures.host,
               "problems": "; ".join([*manifest.problems, *streams.lost, *streams.samples.problems]) or None,
               "started_at": manifest.started_at, "ended_at": manifest.ended_at, "run_dir": str(run.path)}
    return RunReading(jobs, epochs, summary, streams.samples, streams.lost)


def _run_columns(streams: RunStreams) -> dict:
    """The columns every row of a run starts with: which run it is, its mode, copies and repeat, where it ran."""
    manifest = streams.manifest
    return {"run_id": streams.run_id, "experiment": manifest.experiment, "mode": manifest.mode.name,
            "mode_label": manifest.mode.label, "copies": manifest.copies, "repeat": manifest.repeat,
            "sequential": manifest.sequential, "alone": streams.alone,
            "placement": manifest.placement or "pinned",  # None: an older kit's, which pinned every job
            "cell_id": manifest.cell_id, "host": manifest.machine.hostname, "gpu": manifest.gpu,
            "gpu_name": manifest.machine.gpu_name, "host_cpu_s": manifest.host_cpu.cpu_s,
            "warm_window": manifest.warm.window if manifest.warm else None}  # a warm launch's window (0: its first)


def job_row(record: JobRow, base: Mapping[str, Any], run: Mapping[str, Any], job_figures: JobFigures) -> dict:
    """A job's row of `Results.jobs`: the run's `base` columns, its record's, `slot_<key>`, the run's columns `run`
    (its status and folder), its figures not already among its columns (the monitor's flattened), then an inference
    job's latency columns."""
    facts = asdict(record)
    slot = {f"slot_{k}": v for k, v in facts.pop("slot_info").items()}
    own = {k: v for k, v in asdict(job_figures).items() if k not in facts}
    measured, monitor = {"images_per_s_overlap": own.pop("images_per_s_overlap")}, own.pop("monitor")
    serving = own.pop("latency")
    return {**base, **facts, **slot, **measured, **run, **monitor, **own, **serving}


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
