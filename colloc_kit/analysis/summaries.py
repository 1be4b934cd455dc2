"""Tidy-frame analysis of runs: baselines, normalized throughput, epoch-time growth, CIs, memory fit, summaries.

Input is what `colloc_kit.load(...)` returns (`Results`: `.jobs` one row per job per run, `.runs` one per run);
output is more tidy frames that `views.plots` draws. Every figure is defined once, in `analysis.figures`
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
from collections import Counter
from typing import Any, Iterable

import pandas as pd

from colloc_kit.analysis import attribution, fairness, figures
from colloc_kit.analysis.lone import (
    BASELINE_KEYS,
    WORKLOAD,
    baselines,
    complete,
    data_name,
    in_figures,
    keyed,
    measured_rate,
    with_baselines,
    workload_label,
)
from colloc_kit.analysis.results import Results
from colloc_kit.stats import plural, plus_minus
from colloc_kit.statuses import COMPLETE

__all__ = ["RUN_KEYS", "GROUP_KEYS", "UTILIZATION", "WITH_CI", "RUN_METRICS", "NOISE_LIMIT", "COMPLETE", "WORKLOAD",
           "BASELINE_KEYS", "complete", "measured_rate", "in_figures", "baselines", "with_baselines", "workload_label",
           "data_name", "run_summary", "summarize", "summarize_runs", "job_summary", "noise", "impossible_gain",
           "memory_fit", "job_mix_label", "workloads_by_run", "mix_of"]

RUN_KEYS = ["run_id", "experiment", "mode", "mode_label", "copies", "repeat"]
GROUP_KEYS = ["experiment", "mode", "mode_label", "copies", "jobs_label", "workloads"]  # a run configuration
UTILIZATION = ["gpu_util_pct", "sm_util_pct", "sm_occupancy_pct", "tensor_util_pct", "dram_bw_util_pct"]  # monitor
WITH_CI = ["aggregate_images_per_s", "normalized_throughput"]  # figures carrying a 95 % confidence interval
RUN_METRICS = [*WITH_CI, "epoch_time_growth", "fairness_index", "slowdown_max", *UTILIZATION, "energy_per_image_j"]
NOISE_LIMIT = 1.25  # repeats of a cell that differ more, or a baseline whose CI spans more: see `noise`
# what `run_summary` (and `fairness.run_fairness`) reads of a run's jobs: each run is cut from these columns only
_RUN_JOBS = ["run_id", *fairness.JOB_COLUMNS, "steady_s", "baseline_rel_ci", "steady_gpu_memory_mb",
             *(f"{m}_mean" for m in UTILIZATION), "energy_per_image_j", "baseline_note"]


def run_summary(results: Results, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run: the run's own figures from `results.runs` (aggregate and its CI, window, flags, bound_by)
    joined with what needs baselines: normalized throughput (+ `_ci`, absolute), epoch-time growth, fairness
    (`fairness.RUN_COLUMNS`: Jain's index, the jobs' slowdowns, who lost most), utilization, energy per image, steady
    memory.

    `normalized_throughput` is the sum of the jobs' relative throughputs over the jobs that trained in the common
    window (all complete jobs where the run fell back); NaN when one lacks a baseline. An exclusive run trains its jobs
    one after another, so its figures are its jobs' means weighted by measured time (about 1.0).
    """
    trusted = _trusted(results, reference)
    jobs = results.jobs if trusted else with_baselines(results.jobs, reference)
    columns = RUN_KEYS + ["n_jobs", "n_complete", "jobs_label", "workloads", "aggregate_images_per_s",
                          "aggregate_images_per_s_ci", "throughput_window", "window_s", "flags", "bound_by",
                          "normalized_throughput", "normalized_throughput_ci", "epoch_time_growth",
                          *fairness.RUN_COLUMNS, "baseline_rel_ci", "steady_gpu_memory_mb_sum", *UTILIZATION,
                          "energy_per_image_j", "baseline_note", *attribution.RUN_COLUMNS, *attribution.SHARED]
    if jobs.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    labels = workloads_by_run(jobs)
    for run_id, run in jobs[[c for c in _RUN_JOBS if c in jobs]].groupby("run_id", sort=False):
        counted = run[in_figures(run)]
        rel = counted["relative_throughput"]
        normalized = _combined(rel, counted, bool(run["sequential"].iloc[0])) if len(rel) and rel.notna().all() \
            else math.nan
        rows.append({
            "run_id": run_id, "jobs_label": mix_of(labels[run_id]),
            "workloads": " + ".join(sorted(set(labels[run_id]))),
            "normalized_throughput": normalized, "baseline_rel_ci": _mean_of(counted, "baseline_rel_ci"),
            "epoch_time_growth": counted["epoch_time_growth"].mean(),
            "steady_gpu_memory_mb_sum": run["steady_gpu_memory_mb"].sum(min_count=1)
            if "steady_gpu_memory_mb" in run else math.nan,
            **{metric: _mean_of(run, f"{metric}_mean") for metric in UTILIZATION},
            "energy_per_image_j": _mean_of(counted, "energy_per_image_j"),
            "baseline_note": "; ".join(sorted(set(run["baseline_note"].dropna()))) or None,
            **({} if trusted else fairness.run_fairness(run)),
        })
    runs = results.runs if trusted else results.runs.drop(columns=fairness.RUN_COLUMNS, errors="ignore")
    out = runs.merge(pd.DataFrame(rows), on="run_id", how="right")
    out["normalized_throughput_ci"] = [
        n * figures.relative_ci((a, c if c == c else 0.0), (1.0, b if b == b else 0.0))
        for n, a, c, b in zip(out["normalized_throughput"], out["aggregate_images_per_s"].astype(float),
                              out["aggregate_images_per_s_ci"].astype(float), out["baseline_rel_ci"])]
    return attribution.per_run(out, jobs).reindex(columns=columns)


def summarize(results: Results, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each run configuration (experiment, mode, copies, jobs) over its repeats: `<metric>_mean`, `_std`, and for
    aggregate and normalized throughput `_ci` (95 % half-width: over repeats where there are several, combined with
    the baseline's own CI; a single run's within-run CI otherwise), `repeats`, `n_jobs` (the jobs of one run: the
    copies, or a mix's jobs), `flags` (every repeat's, plus
    "wide CI" past +-3 %) and the most frequent `bound_by`.

    >>> summarize(colloc_kit.load("runs"))[["mode_label", "copies", "aggregate_images_per_s_mean"]]   # doctest: +SKIP
    """
    return summarize_runs(run_summary(results, reference))


def summarize_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """`summarize` of runs already summarized (`run_summary`'s rows): for a caller that needs both."""
    stat_columns = [f"{m}_{s}" for m in RUN_METRICS for s in ("mean", "std")] + [f"{m}_ci" for m in WITH_CI] \
        + ["baseline", *attribution.SUMMARY_COLUMNS]
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
        flags = [f for run_flags in group["flags"].dropna() for f in run_flags.replace("+-", "± ").split("; ")
                 if len(group) == 1 or not f.startswith("wide CI")]  # over repeats, the repeats' CI counts; older
        # runs' flags read in the one format (± for a CI)
        if len(group) > 1 and figures.wide(row["aggregate_images_per_s_mean"], row["aggregate_images_per_s_ci"]):
            width = row["aggregate_images_per_s_ci"] / row["aggregate_images_per_s_mean"]
            flags.append(f"wide CI ({plus_minus(width, 1)})")
        row["flags"] = "; ".join(dict.fromkeys(flags)) or None
        verdicts = group["bound_by"].dropna()
        row["bound_by"] = verdicts.mode().iloc[0] if len(verdicts) else None
        row |= {"baseline": group["baseline"].iloc[0], "study_gain_mean": row["normalized_throughput_mean"],
                "study_gain_ci": row["normalized_throughput_ci"], **attribution.over_repeats(group)}
        rows.append(row)
    summary = pd.DataFrame(rows, columns=GROUP_KEYS + ["repeats", "n_jobs", "flags", "bound_by"] + stat_columns)
    return summary.sort_values(["experiment", "mode_label", "copies"], ignore_index=True)


def job_summary(results: Results, reference: pd.DataFrame | None = None,
                runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per job of each run configuration whose jobs shared the device, over its repeats (a job is matched
    across repeats by its id, e.g. 'j1-resnet26'): its workload (model, precision) and slot,
    `relative_throughput_mean/_std`, its slowdown `epoch_time_growth_mean`, its configured share beside the share it
    had (`share_asked_pct`, `share_had_pct_mean`, `colloc_kit.analysis.fairness`), and its configuration's
    `fairness_index_mean`. What `plots.who_lost` draws; baselines as in `summarize` (`reference=` borrows them).
    `runs`: `run_summary(results, reference)`'s rows, for a caller that made them already (summarized once).

    >>> job_summary(colloc_kit.load("runs"))[["jobs_label", "job", "epoch_time_growth_mean"]]   # doctest: +SKIP
    """
    columns = [*GROUP_KEYS, "job", "workload", "model", "amp", "slot_label", "repeats", "relative_throughput_mean",
               "relative_throughput_std", "epoch_time_growth_mean", "share_asked_pct", "share_had_pct_mean",
               "fairness_index_mean"]
    trusted = _trusted(results, reference)
    jobs = results.jobs if trusted else fairness.with_shares(with_baselines(results.jobs, reference))
    if jobs.empty:
        return pd.DataFrame(columns=columns)
    runs = (run_summary(results, reference) if runs is None else runs)[["run_id", "jobs_label", "workloads",
                                                                         "fairness_index"]]
    shared = jobs[~jobs["sequential"].astype(bool) & in_figures(jobs)].merge(runs, on="run_id")
    if shared.empty:
        return pd.DataFrame(columns=columns)
    shared = shared.assign(workload=shared.apply(workload_label, axis=1))
    out = shared.groupby([*GROUP_KEYS, "job"], dropna=False, sort=False).agg(
        workload=("workload", "first"), model=("model", "first"), amp=("amp", "first"),
        slot_label=("slot_label", "first"), repeats=("run_id", "nunique"),
        relative_throughput_mean=("relative_throughput", "mean"),
        relative_throughput_std=("relative_throughput", "std"),
        epoch_time_growth_mean=("epoch_time_growth", "mean"), share_asked_pct=("share_asked_pct", "first"),
        share_had_pct_mean=("share_had_pct", "mean"), fairness_index_mean=("fairness_index", "mean")).reset_index()
    return out.reindex(columns=columns)


def noise(jobs: pd.DataFrame, summary: pd.DataFrame | None = None, limit: float = NOISE_LIMIT) -> str | None:
    """A warning when measurements cannot tell ways of sharing apart, judged from repeats and baselines only:
    repeats of one cell (experiment, mode, copies, jobs) whose images/s, summed over their jobs, differ by more than
    `limit` (largest / smallest); a lone baseline whose 95 % CI spans more than `limit` ((mean + CI) / (mean - CI));
    or, in `summary` (`summarize` of the same results), a configuration "gaining" more than its jobs can give: n jobs
    at once at most n times one job alone (a mix counts its jobs, not its copies), jobs one after another (exclusive)
    at most once. None when none of these happens.

    Identical jobs of one run that differ are not noise: that is what sharing did to them, their fairness
    (`colloc_kit.analysis.fairness`; `results.runs["fairness_index"]`).

    >>> jobs = pd.DataFrame([{"run_id": r, "experiment": "e", "mode": "naive", "mode_label": "naive", "copies": 2,
    ...     "sequential": False, "alone": False, "job": j, "model": "m", "dataset": "synthetic", "data_root": None,
    ...     "image_size": 32, "batch_size": 8, "amp": "off", "recipe": "kit", "device": "cpu", "status": "complete",
    ...     "images_per_s": rate, "peak_memory_mb": 1.0} for r, j, rate in
    ...     (("r0", "j0", 100.0), ("r0", "j1", 40.0), ("r1", "j0", 100.0), ("r1", "j1", 45.0))])
    >>> noise(jobs) is None                        # j0 and j1 differ 2.5x: fairness, not noise
    True
    >>> noise(jobs.assign(images_per_s=[100.0, 40.0, 150.0, 60.0]))   # doctest: +ELLIPSIS
    'repeats of one cell differ 1.50x in images/s (e naive x2: 2 x m bs8, 2 repeats): ...'
    """
    done = complete(jobs) if len(jobs) else jobs
    if done.empty:
        return None
    warnings = []
    spread, cell, repeats = _repeat_spread(done)
    if spread > limit:
        warnings.append(f"repeats of one cell differ {spread:.2f}x in images/s ({cell}, {repeats} repeats): "
                        f"differences between ways of sharing under {spread:.2f}x are noise; run more repeats")
    base = baselines(done)
    rel = (base["baseline_images_per_s_ci"].astype(float) / base["baseline_images_per_s"].astype(float)).dropna()
    if len(rel) and (1 + rel.max()) > limit * (1 - rel.max()):
        worst = base.loc[rel.idxmax()]
        lone = plural(int(worst["baseline_jobs"]), "lone job")
        warnings.append(f"the lone run of {workload_label(worst)} in {worst['experiment']} is known only to "
                        f"{plus_minus(rel.max())} (95 % CI over {lone}): gains "
                        "of it closer than that are noise; repeat its lone run (FRESH = True in a notebook, "
                        "again=True in colloc_kit.run, or the panel's Run measure a new repeat)")
    impossible = impossible_gain(summary, limit) if summary is not None and len(summary) else None
    return "; ".join(warnings + ([impossible] if impossible else [])) or None


def impossible_gain(summary: pd.DataFrame, limit: float) -> str | None:
    """The configuration that gained most beyond what its jobs can give, said in a sentence; None if none did."""
    jobs = summary["n_jobs"] if "n_jobs" in summary else summary["copies"]
    one_after_another = summary["mode"].eq("exclusive") if "mode" in summary else pd.Series(False, summary.index)
    most = jobs.where(~one_after_another, 1).astype(float)
    excess = summary["normalized_throughput_mean"].astype(float) / most
    if not (excess > limit).any():
        return None
    row, n = summary.loc[excess.idxmax()], int(most[excess.idxmax()])
    mode = row.get("mode_label", row.get("mode", ""))
    label = (f"{mode} x{int(row['copies'])}" if n == int(row["copies"]) or n == 1 else
             f"{mode} of {row.get('jobs_label') or f'{n} jobs'}").strip()
    can = "one after another, jobs can give at most 1x" if one_after_another[excess.idxmax()] else \
        f"{n} jobs at once can give at most {n}x"
    return (f"{label} trained {row['normalized_throughput_mean']:.1f}x one job alone, more than sharing can give "
            f"({can}): these measurements are noise (too short a steady window, or a busy machine); give the jobs "
            "more steps, or measure on a quieter machine")


def _repeat_spread(jobs: pd.DataFrame) -> tuple[float, str, int]:
    """The largest spread (largest / smallest images/s summed over a run's jobs) between repeats of one cell: the
    spread, the cell in words and its repeats; (1.0, "", 0) where no cell has repeats. A cell is its experiment, way
    of sharing, copies and its jobs' every `WORKLOAD` key (a job with other loader workers or data is another cell,
    not a repeat). A lone baseline's repeats are left to its CI (`noise`): its spread scales every way of sharing
    alike, so it cannot blur one against another."""
    alone = jobs["alone"].astype(bool) if "alone" in jobs else pd.Series(False, jobs.index)
    counted = jobs[in_figures(jobs) & ~(alone & jobs["mode"].eq("exclusive"))]
    labels = workloads_by_run(counted)
    keys = keyed(counted).reindex(columns=WORKLOAD).astype(str).apply(tuple, axis=1)
    cells = counted[["run_id", "experiment", "mode_label", "copies"]].assign(rate=measured_rate(counted), key=keys)
    totals = []
    for run_id, run in cells.groupby("run_id", sort=False):
        first = run.iloc[0]
        words = f"{first['experiment']} {first['mode_label']} x{first['copies']}: {mix_of(labels[run_id])}"
        totals.append({"cell": (words, *sorted(run["key"])), "images_per_s": float(run["rate"].sum())})
    frame = pd.DataFrame(totals, columns=["cell", "images_per_s"])
    per_cell = frame.groupby("cell", sort=False)["images_per_s"]
    spread = (per_cell.max() / per_cell.min())[per_cell.count() > 1]
    if spread.empty:
        return 1.0, "", 0
    worst = spread.idxmax()
    return float(spread.max()), worst[0], int(per_cell.count()[worst])


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


def job_mix_label(run: pd.DataFrame) -> str:
    """What a run trained, e.g. '2 x resnet18 bs64' or 'resnet152 bs32 + resnet50 bs64'."""
    return mix_of(run.apply(workload_label, axis=1))


def workloads_by_run(jobs: pd.DataFrame) -> dict[Any, list[str]]:
    """Each run's jobs' workload labels (`workload_label`), in job order, by run id: every job labelled at once."""
    return {run_id: list(labels) for run_id, labels in
            jobs.apply(workload_label, axis=1).groupby(jobs["run_id"], sort=False)} if len(jobs) else {}


def mix_of(labels: Iterable[str]) -> str:
    """`job_mix_label` of a run's jobs' workload labels, in job order (`workloads_by_run`).

    >>> mix_of(["resnet18 bs64", "resnet50 bs64", "resnet18 bs64"])
    '2 x resnet18 bs64 + resnet50 bs64'
    """
    counts = Counter(labels)  # in the order first seen
    return " + ".join(f"{n} x {label}" if n > 1 else label for label, n in counts.items())


def _trusted(results: Results, reference: pd.DataFrame | None) -> bool:
    """Whether `results` holds the frames `load()` derived (`Results.derived`: baselines, shares, fairness) and no
    borrowed baseline (`reference=`) asks for them again: then they are read, not derived a second time."""
    return reference is None and results.derived


def _mean_of(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).mean() if column in frame and frame[column].notna().any() else math.nan


def _combined(values: pd.Series, jobs: pd.DataFrame, sequential: bool) -> float:
    """Jobs that trained together add up; jobs trained one after another average, weighted by measured time."""
    if not sequential:
        return float(values.sum())
    weights = jobs["steady_s"].astype(float)
    return float((values * weights).sum() / weights.sum())
