"""Tidy-frame analysis of runs: baselines, normalized throughput, epoch-time growth, CIs, memory fit, summaries.

Input is what `colloc_kit.load(...)` returns (`Results`: `.jobs` one row per job per run, `.runs` one per run);
output is more tidy frames that `colloc_kit.plots` draws. Every figure is defined once, in `colloc_kit.figures`
(read its rules); this module groups and joins. A job's *baseline* is the same workload (model, dataset, batch size,
precision, device) run alone in the same experiment; its *relative throughput* is its rate in the run's common window
over that baseline; a run's *normalized throughput* is the sum of its jobs' relative throughputs (1.0 = as much work as
one job alone; the seed study's "up to 4x" is 4.0).

    >>> results = colloc_kit.load("runs")                                          # doctest: +SKIP
    >>> summary = summarize(results)                                               # doctest: +SKIP
    >>> summary[["mode_label", "copies", "normalized_throughput_mean", "flags"]]   # doctest: +SKIP
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from . import figures
from .results import Results
from .statuses import COMPLETE

# jobs with equal values here do the same work
WORKLOAD = ["model", "dataset", "data_root", "image_size", "batch_size", "amp", "recipe", "device"]
BASELINE_KEYS = ["experiment", *WORKLOAD]  # a baseline belongs to its experiment
RUN_KEYS = ["run_id", "experiment", "mode", "mode_label", "copies", "repeat"]
GROUP_KEYS = ["experiment", "mode", "mode_label", "copies", "jobs_label", "workloads"]  # a run configuration
UTILIZATION = ["gpu_util_pct", "sm_util_pct", "sm_occupancy_pct", "tensor_util_pct", "dram_bw_util_pct"]  # monitor
WITH_CI = ["aggregate_images_per_s", "normalized_throughput"]  # figures carrying a 95 % confidence interval
RUN_METRICS = [*WITH_CI, "epoch_time_growth", *UTILIZATION, "energy_per_image_j"]


def complete(jobs: pd.DataFrame) -> pd.DataFrame:
    """The jobs that finished and measured a throughput."""
    if jobs.empty:
        return jobs
    return jobs[(jobs["status"] == COMPLETE) & jobs["images_per_s"].notna()]


def measured_rate(jobs: pd.DataFrame) -> pd.Series:
    """Each job's images/s in its run's common window, or its own measured rate where it ran alone (exclusive)
    or its run fell back to own windows (flagged)."""
    own = jobs["images_per_s"].astype(float)
    return jobs["images_per_s_overlap"].astype(float).fillna(own) if "images_per_s_overlap" in jobs else own


def in_figures(jobs: pd.DataFrame) -> pd.Series:
    """Which jobs a run's figures count: those that trained in the common window (a job that failed later
    included, see figures), or complete jobs with their own rate where the run had no common window."""
    counted = jobs["status"].eq(COMPLETE) & jobs["images_per_s"].notna()
    return counted | jobs["images_per_s_overlap"].notna() if "images_per_s_overlap" in jobs else counted


def baselines(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, workload) run alone: mean images/s with its 95 % CI, step time, memory, count.

    The CI is over the lone jobs (repeats) where there are several, else the single job's within-run CI.

    >>> baselines(colloc_kit.load("runs").jobs)[["model", "baseline_images_per_s"]]   # doctest: +SKIP
    """
    columns = BASELINE_KEYS + ["baseline_images_per_s", "baseline_images_per_s_ci", "baseline_step_time_s",
                               "baseline_peak_memory_mb", "baseline_steady_gpu_memory_mb", "baseline_jobs"]
    solo = complete(jobs)
    solo = solo[solo["alone"].astype(bool)] if len(solo) else solo
    if solo.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for keys, group in solo.groupby(BASELINE_KEYS, dropna=False, sort=False):
        mean, ci = figures.ci95(group["images_per_s"])
        if len(group) == 1 and "images_per_s_ci" in group:
            ci = float(group["images_per_s_ci"].iloc[0])
        rows.append({**dict(zip(BASELINE_KEYS, keys)), "baseline_images_per_s": mean, "baseline_images_per_s_ci": ci,
                     "baseline_step_time_s": group["batch_size"].iloc[0] / mean,
                     "baseline_peak_memory_mb": group["peak_memory_mb"].median(),
                     "baseline_steady_gpu_memory_mb": _median(group, "steady_gpu_memory_mb"),
                     "baseline_jobs": len(group)})
    return pd.DataFrame(rows, columns=columns)


def with_baselines(jobs: pd.DataFrame, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """The jobs frame plus each job's baseline (and its relative CI, `baseline_rel_ci`), `relative_throughput` and
    `epoch_time_growth`.

    Baselines come from the lone jobs of the job's own experiment; a job whose experiment has none gets NaN and a
    `baseline_note` saying what to run. `reference`: a jobs frame to take baselines from instead (matched by workload
    alone, whatever its experiment), e.g. an earlier baseline experiment: an explicit choice, never a silent one.
    """
    if jobs.empty:
        return jobs.assign(relative_throughput=pd.Series(dtype=float), epoch_time_growth=pd.Series(dtype=float))
    base = baselines(jobs if reference is None else reference)
    keys = BASELINE_KEYS if reference is None else WORKLOAD
    if reference is not None:  # one baseline per workload over the reference's experiments
        base = base.drop(columns="experiment").drop_duplicates(WORKLOAD, keep="last")
    base = base.astype({k: jobs[k].dtype for k in keys})  # an all-empty key (data_root of synthetic data) as the jobs'
    out = jobs.merge(base, on=keys, how="left")
    out.index = jobs.index
    counted = in_figures(out)
    baseline = out["baseline_images_per_s"].astype(float)
    out["relative_throughput"] = (measured_rate(out) / baseline).where(counted)
    out["baseline_rel_ci"] = out["baseline_images_per_s_ci"].astype(float) / baseline
    out["epoch_time_growth"] = (baseline / measured_rate(out)).where(counted)  # an epoch is a fixed number of images
    where = "the reference given" if reference is not None else "its experiment"
    out["baseline_note"] = [None if b == b else f"no lone run of {workload_label(row)} in {where}: add "
                            "mode exclusive with copies 1 to the experiment (or pass reference=)"
                            for b, (_, row) in zip(baseline, out.iterrows())]
    return out


def run_summary(results: Results, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run: the run's own figures from `results.runs` (aggregate and its CI, window, flags, bound_by)
    joined with what needs baselines: normalized throughput (+ `_ci`, absolute), epoch-time growth, utilization,
    energy per image, steady memory.

    `normalized_throughput` is the sum of the jobs' relative throughputs over the jobs that trained in the common
    window (all complete jobs where the run fell back); NaN when one lacks a baseline. An exclusive run trains its jobs
    one after another, so its figures are its jobs' means weighted by measured time (about 1.0).
    """
    jobs = with_baselines(results.jobs, reference)
    columns = RUN_KEYS + ["n_jobs", "n_complete", "jobs_label", "workloads", "aggregate_images_per_s",
                          "aggregate_images_per_s_ci", "throughput_window", "window_s", "flags", "bound_by",
                          "normalized_throughput", "normalized_throughput_ci", "epoch_time_growth",
                          "baseline_rel_ci", "steady_gpu_memory_mb_sum", *UTILIZATION, "energy_per_image_j",
                          "baseline_note"]
    if jobs.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for run_id, run in jobs.groupby("run_id", sort=False):
        counted = run[in_figures(run)]
        rel = counted["relative_throughput"]
        normalized = _combined(rel, counted, bool(run["sequential"].iloc[0])) if len(rel) and rel.notna().all() \
            else math.nan
        rows.append({
            "run_id": run_id, "jobs_label": job_mix_label(run),
            "workloads": " + ".join(sorted(set(run.apply(workload_label, axis=1)))),
            "normalized_throughput": normalized, "baseline_rel_ci": _mean_of(counted, "baseline_rel_ci"),
            "epoch_time_growth": counted["epoch_time_growth"].mean(),
            "steady_gpu_memory_mb_sum": run["steady_gpu_memory_mb"].sum(min_count=1)
            if "steady_gpu_memory_mb" in run else math.nan,
            **{metric: _mean_of(run, f"{metric}_mean") for metric in UTILIZATION},
            "energy_per_image_j": _mean_of(counted, "energy_per_image_j"),
            "baseline_note": "; ".join(sorted(set(run["baseline_note"].dropna()))) or None,
        })
    out = results.runs.merge(pd.DataFrame(rows), on="run_id", how="right")
    out["normalized_throughput_ci"] = [
        n * figures.relative_ci((a, c if c == c else 0.0), (1.0, b if b == b else 0.0))
        for n, a, c, b in zip(out["normalized_throughput"], out["aggregate_images_per_s"].astype(float),
                              out["aggregate_images_per_s_ci"].astype(float), out["baseline_rel_ci"])]
    return out.reindex(columns=columns)


def summarize(results: Results, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each run configuration (experiment, mode, copies, jobs) over its repeats: `<metric>_mean`, `_std`, and for
    aggregate and normalized throughput `_ci` (95 % half-width: over repeats where there are several, combined with
    the baseline's own CI; a single run's within-run CI otherwise), `repeats`, `n_jobs` (the jobs of one run: the
    copies, or a mix's jobs), `flags` (every repeat's, plus
    "wide CI" past +-3 %) and the most frequent `bound_by`.

    >>> summarize(colloc_kit.load("runs"))[["mode_label", "copies", "aggregate_images_per_s_mean"]]   # doctest: +SKIP
    """
    runs = run_summary(results, reference)
    stat_columns = [f"{m}_{s}" for m in RUN_METRICS for s in ("mean", "std")] + [f"{m}_ci" for m in WITH_CI]
    if runs.empty:
        return pd.DataFrame(columns=GROUP_KEYS + ["repeats", "n_jobs", "flags", "bound_by"] + stat_columns)
    rows = []
    for keys, group in runs.groupby(GROUP_KEYS, dropna=False, sort=False):
        row = {**dict(zip(GROUP_KEYS, keys)), "repeats": len(group), "n_jobs": group["n_jobs"].max()}
        for metric in RUN_METRICS:
            values = group[metric].astype(float)
            row[f"{metric}_mean"], row[f"{metric}_std"] = values.mean(), values.std()
        for metric in WITH_CI:
            within = group[f"{metric}_ci"].astype(float)
            row[f"{metric}_ci"] = figures.ci95(group[metric])[1] if len(group) > 1 else within.iloc[0]
        if len(group) > 1:  # the repeats share one baseline: its uncertainty does not average out
            base_rel = group["baseline_rel_ci"].astype(float).mean()
            mean, ci = row["normalized_throughput_mean"], row["normalized_throughput_ci"]
            base_part = (1.0, base_rel if base_rel == base_rel else 0.0)  # NaN: no baseline CI
            row["normalized_throughput_ci"] = mean * figures.relative_ci((mean, ci), base_part)
        flags = [f for run_flags in group["flags"].dropna() for f in run_flags.split("; ")
                 if len(group) == 1 or not f.startswith("wide CI")]  # over repeats, the repeats' CI counts
        if len(group) > 1 and figures.wide(row["aggregate_images_per_s_mean"], row["aggregate_images_per_s_ci"]):
            width = 100 * row["aggregate_images_per_s_ci"] / row["aggregate_images_per_s_mean"]
            flags.append(f"wide CI (+-{width:.1f} %)")
        row["flags"] = "; ".join(dict.fromkeys(flags)) or None
        verdicts = group["bound_by"].dropna()
        row["bound_by"] = verdicts.mode().iloc[0] if len(verdicts) else None
        rows.append(row)
    summary = pd.DataFrame(rows, columns=GROUP_KEYS + ["repeats", "n_jobs", "flags", "bound_by"] + stat_columns)
    return summary.sort_values(["experiment", "mode_label", "copies"], ignore_index=True)


def memory_fit(jobs: pd.DataFrame, capacities_mb: dict[str, float]) -> pd.DataFrame:
    """How many copies of each workload fit in each memory capacity, from its steady footprint when run alone.

    The footprint is `steady_gpu_memory_mb` (NVML per process, CUDA context included; figures.copies_fit keeps
    `figures.MEMORY_MARGIN` free); torch's transient `peak_memory_mb` is shown beside it, not used. Without a
    monitored GPU there is no footprint: `copies_fit` is empty and `note` says why.

    >>> memory_fit(jobs, {"H100 80GB": 81559, "MIG 1g.10gb": 9984})   # doctest: +SKIP
    """
    columns = WORKLOAD + ["workload", "steady_gpu_memory_mb", "peak_memory_mb", "capacity", "capacity_mb",
                          "copies_fit", "note"]
    base = baselines(jobs).drop_duplicates(WORKLOAD, keep="last")
    rows = []
    for _, row in base.iterrows():
        footprint = row["baseline_steady_gpu_memory_mb"]
        measured = footprint == footprint and footprint  # not NaN, not 0
        note = None if measured else "no steady GPU memory measured (CPU job, or no monitor)"
        for name, capacity in capacities_mb.items():
            rows.append({**{k: row[k] for k in WORKLOAD}, "workload": workload_label(row),
                         "steady_gpu_memory_mb": footprint, "peak_memory_mb": row["baseline_peak_memory_mb"],
                         "capacity": name, "capacity_mb": float(capacity),
                         "copies_fit": figures.copies_fit(capacity, footprint), "note": note})
    return pd.DataFrame(rows, columns=columns)


def workload_label(row) -> str:
    """A short label such as 'resnet18 bs64 bf16': '... seed' for the seed study's recipe, '... on cifar10' for data
    other than synthetic (`data_name`), so that one model on two datasets gives two workloads.

    >>> workload_label({"model": "timm.resnet26", "batch_size": 128, "amp": "off", "recipe": "seed",
    ...                 "dataset": "imagefolder", "data_root": "/tmp/seed-data/cifar10"})
    'timm.resnet26 bs128 seed on cifar10'
    """
    amp, recipe, data = row.get("amp"), row.get("recipe"), data_name(row.get("dataset"), row.get("data_root"))
    return (f"{row['model']} bs{int(row['batch_size'])}" + (f" {amp}" if amp and amp != "off" else "")
            + (f" {recipe}" if recipe and recipe != "kit" else "") + (f" on {data}" if data else ""))


def data_name(dataset, data_root) -> str | None:
    """The data a job reads, in one word: an image folder's name, or the dataset; None for synthetic images.

    >>> data_name("imagefolder", "/data/imagenet64"), data_name("cifar10", "/data"), data_name("synthetic", None)
    ('imagenet64', 'cifar10', None)
    """
    if dataset == "imagefolder" and isinstance(data_root, str) and data_root:
        return Path(data_root).name
    return dataset if isinstance(dataset, str) and dataset and dataset != "synthetic" else None


def job_mix_label(run: pd.DataFrame) -> str:
    """What a run trained, e.g. '2 x resnet18 bs64' or 'resnet152 bs32 + resnet50 bs64'."""
    counts = run.apply(workload_label, axis=1).value_counts(sort=False)
    return " + ".join(f"{n} x {label}" if n > 1 else label for label, n in counts.items())


def _median(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).median() if column in frame and frame[column].notna().any() else math.nan


def _mean_of(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).mean() if column in frame and frame[column].notna().any() else math.nan


def _combined(values: pd.Series, jobs: pd.DataFrame, sequential: bool) -> float:
    """Jobs that trained together add up; jobs trained one after another average, weighted by measured time."""
    if not sequential:
        return float(values.sum())
    weights = jobs["steady_s"].astype(float)
    return float((values * weights).sum() / weights.sum())
