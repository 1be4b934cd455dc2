"""Tidy-frame analysis of runs: baselines, normalized throughput, epoch-time growth, memory fit, per-run summaries.

Input is the `.jobs` frame of `colloc_kit.load(...)` (one row per job per run); output is more tidy frames that
`colloc_kit.plots` draws. A job's *baseline* is the same workload (model, dataset, batch size, precision, device)
run alone; its *relative throughput* is its images/s divided by that baseline; a run's *normalized throughput* is the
sum of its jobs' relative throughputs (1.0 = as much work as one job alone; the seed study's "up to 4x" is 4.0).

    >>> jobs = colloc_kit.load("runs").jobs                                  # doctest: +SKIP
    >>> summary = summarize(with_baselines(jobs))                            # doctest: +SKIP
    >>> summary[["mode_label", "copies", "normalized_throughput_mean", "epoch_time_growth_mean"]]   # doctest: +SKIP
"""

from __future__ import annotations

import math

import pandas as pd

from .statuses import COMPLETE

WORKLOAD = ["model", "dataset", "batch_size", "amp", "device"]  # jobs with equal values here do the same work
RUN_KEYS = ["run_id", "experiment", "mode", "mode_label", "copies", "repeat"]
GROUP_KEYS = ["experiment", "mode", "mode_label", "copies"]  # a run configuration, over repeats
UTILIZATION = ["gpu_util_pct", "sm_util_pct", "sm_occupancy_pct", "tensor_util_pct", "dram_bw_util_pct"]  # monitor
RUN_METRICS = ["aggregate_images_per_s", "normalized_throughput", "epoch_time_growth", *UTILIZATION,
               "energy_per_image_j"]


def complete(jobs: pd.DataFrame) -> pd.DataFrame:
    """The jobs that finished and measured a throughput."""
    if jobs.empty:
        return jobs
    return jobs[(jobs["status"] == COMPLETE) & jobs["images_per_s"].notna()]


def measured_rate(jobs: pd.DataFrame) -> pd.Series:
    """Images/s of each job while its run's jobs all trained together (`images_per_s_overlap`), else its own rate."""
    if "images_per_s_overlap" in jobs:
        return jobs["images_per_s_overlap"].astype(float).fillna(jobs["images_per_s"].astype(float))
    return jobs["images_per_s"].astype(float)


def alone(jobs: pd.DataFrame) -> pd.DataFrame:
    """Complete jobs that had the device to themselves: a sequential run (exclusive mode) or a one-job run."""
    done = complete(jobs)
    if done.empty:
        return done
    jobs_per_run = jobs.groupby("run_id")["job"].transform("count").loc[done.index]
    return done[done["sequential"].astype(bool) | (jobs_per_run == 1)]


def baselines(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per workload run alone: median images/s, epoch time and peak memory over its alone runs.

    >>> baselines(jobs)[["model", "batch_size", "baseline_images_per_s"]]   # doctest: +SKIP
    """
    solo = alone(jobs)
    columns = WORKLOAD + ["baseline_images_per_s", "baseline_epoch_time_s", "baseline_step_time_s",
                          "baseline_peak_memory_mb", "baseline_jobs"]
    if solo.empty:
        return pd.DataFrame(columns=columns)
    solo = solo.assign(rate=measured_rate(solo), epoch_time_s=solo["epoch_time_s"].astype(float),
                       step_time_s=solo["step_time_s"].astype(float))
    grouped = solo.groupby(WORKLOAD, dropna=False)
    return grouped.agg(baseline_images_per_s=("rate", "median"), baseline_epoch_time_s=("epoch_time_s", "median"),
                       baseline_step_time_s=("step_time_s", "median"),
                       baseline_peak_memory_mb=("peak_memory_mb", "median"),
                       baseline_jobs=("rate", "size")).reset_index()[columns]


def with_baselines(jobs: pd.DataFrame, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """The jobs frame plus each job's baseline, `relative_throughput` and `epoch_time_growth` (NaN without a baseline).

    Epoch-time growth is measured on epochs where jobs ran whole epochs, else on step time (same dataset, same ratio).

    `reference`: jobs to take baselines from (default: `jobs` itself), e.g. an earlier baseline experiment.
    """
    if jobs.empty:
        return jobs
    base = baselines(jobs if reference is None else reference)
    out = jobs.merge(base, on=WORKLOAD, how="left")
    out.index = jobs.index
    done = out["status"].eq(COMPLETE)
    out["relative_throughput"] = (measured_rate(out) / out["baseline_images_per_s"]).where(done)
    by_epoch = out["epoch_time_s"].astype(float) / out["baseline_epoch_time_s"].astype(float)
    by_step = out["step_time_s"].astype(float) / out["baseline_step_time_s"].astype(float)
    out["epoch_time_growth"] = by_epoch.fillna(by_step).where(done)  # a step budget ends before an epoch does
    return out


def run_summary(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: jobs complete, aggregate and normalized throughput, epoch-time growth, utilization, energy.

    Takes the output of `with_baselines`. `normalized_throughput` is the sum of the complete jobs' relative
    throughputs; it is NaN when any complete job lacks a baseline. A sequential (exclusive) run trains its jobs one
    after another, so its figures are its jobs' means weighted by their steady time, not sums (its normalized
    throughput is about 1.0). Energy per image is the run's GPU energy over the images its jobs trained in the monitored window
    (where a GPU was monitored).
    """
    if jobs.empty:
        return pd.DataFrame(columns=RUN_KEYS + ["n_jobs", "n_complete"] + RUN_METRICS)
    rows = []
    for keys, run in jobs.groupby(RUN_KEYS, dropna=False, sort=False):
        done = run[run["status"] == COMPLETE]
        rel = done["relative_throughput"] if "relative_throughput" in done else pd.Series(dtype=float)
        sequential = bool(run["sequential"].iloc[0])
        rows.append({
            **dict(zip(RUN_KEYS, keys)),
            "n_jobs": len(run), "n_complete": len(done),
            "jobs_label": job_mix_label(run),
            "workloads": " + ".join(sorted(set(run.apply(workload_label, axis=1)))),
            "aggregate_images_per_s": _combined(measured_rate(done), done, sequential) if len(done) else math.nan,
            "normalized_throughput": _combined(rel, done, sequential) if len(done) and rel.notna().all() else math.nan,
            "epoch_time_growth": done["epoch_time_growth"].mean() if "epoch_time_growth" in done else math.nan,
            "peak_memory_mb_sum": done["peak_memory_mb"].sum(min_count=1),
            **{metric: _mean_of(done, f"{metric}_mean") for metric in UTILIZATION},
            "energy_per_image_j": _run_energy_per_image(done),
        })
    return pd.DataFrame(rows)


def summarize(jobs: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over repeats of each run configuration (experiment, mode, copies).

    Columns `<metric>_mean`, `<metric>_std` for every metric of `run_summary`, plus `repeats`.
    """
    runs = run_summary(jobs)
    if runs.empty:
        return pd.DataFrame(columns=GROUP_KEYS + ["jobs_label", "workloads", "repeats"]
                            + [f"{m}_{s}" for m in RUN_METRICS for s in ("mean", "std")])
    grouped = runs.groupby(GROUP_KEYS + ["jobs_label", "workloads"], dropna=False, sort=False)
    stats = grouped[RUN_METRICS].agg(["mean", "std"])
    stats.columns = [f"{metric}_{stat}" for metric, stat in stats.columns]
    stats["repeats"] = grouped.size()
    return stats.reset_index().sort_values(["experiment", "mode_label", "copies"], ignore_index=True)


def memory_fit(jobs: pd.DataFrame, capacities_mb: dict[str, float]) -> pd.DataFrame:
    """How many copies of each workload fit in each memory capacity, from measured peak memory when run alone.

    >>> memory_fit(jobs, {"H100 80GB": 81559, "MIG 1g.10gb": 9984})   # doctest: +SKIP
    One row per (workload, capacity): peak_memory_mb, capacity_mb, copies_fit (floor(capacity / peak)).
    """
    base = baselines(jobs).dropna(subset=["baseline_peak_memory_mb"])
    rows = [{**{k: row[k] for k in WORKLOAD}, "workload": workload_label(row),
             "peak_memory_mb": row["baseline_peak_memory_mb"], "capacity": name, "capacity_mb": float(capacity),
             "copies_fit": int(capacity // row["baseline_peak_memory_mb"]) if row["baseline_peak_memory_mb"] > 0 else None}
            for _, row in base.iterrows() for name, capacity in capacities_mb.items()]
    return pd.DataFrame(rows, columns=WORKLOAD + ["workload", "peak_memory_mb", "capacity", "capacity_mb", "copies_fit"])


def workload_label(row) -> str:
    """A short label such as 'resnet18 bs64 bf16'."""
    amp = row.get("amp")
    return f"{row['model']} bs{int(row['batch_size'])}" + (f" {amp}" if amp and amp != "off" else "")


def job_mix_label(run: pd.DataFrame) -> str:
    """What a run trained, e.g. '2 x resnet18 bs64' or 'resnet152 bs32 + resnet50 bs64'."""
    counts = run.apply(workload_label, axis=1).value_counts(sort=False)
    return " + ".join(f"{n} x {label}" if n > 1 else label for label, n in counts.items())


def _mean_of(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).mean() if column in frame and frame[column].notna().any() else math.nan


def _combined(values: pd.Series, done: pd.DataFrame, sequential: bool) -> float:
    """Jobs that trained together add up; jobs trained one after another average, weighted by steady time."""
    if not values.notna().any():
        return math.nan
    if not sequential:
        return float(values.sum())
    weights = done["steady_s"].astype(float).where(values.notna())
    return float((values * weights).sum() / weights.sum())


def _run_energy_per_image(done: pd.DataFrame) -> float:
    """GPU joules per trained image for the run: the monitor's per-job figures are the device's energy over the
    run's window divided by the images every job trained in it, so they agree across the run's jobs."""
    return _mean_of(done, "energy_per_image_j")
