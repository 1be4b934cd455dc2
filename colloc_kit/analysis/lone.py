"""Each job's lone baseline: the same workload run alone in the same experiment, and what is measured against it
(relative throughput, epoch-time growth, i.e. the job's slowdown). `results.load` joins these onto every job, and
`analysis` (which re-exports these names) borrows baselines from another experiment where asked (`reference=`).

The rules are `colloc_kit.analysis.figures`' ("Baseline", "Relative throughput"); this module is their pandas form.

    >>> jobs = pd.DataFrame([{"run_id": r, "experiment": "e", "model": "m", "dataset": "synthetic", "data_root": None,
    ...     "image_size": 32, "batch_size": 8, "amp": "off", "recipe": "kit", "device": "cpu", "status": "complete",
    ...     "alone": r == "a", "sequential": False, "images_per_s": rate, "peak_memory_mb": 1.0}
    ...     for r, rate in (("a", 100.0), ("b", 80.0))])
    >>> list(with_baselines(jobs)["relative_throughput"])
    [1.0, 0.8]
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from colloc_kit.spec import RECIPE_DEFAULTS, JobSpec
from colloc_kit.stats import ci95
from colloc_kit.statuses import COMPLETE

__all__ = ["WORKLOAD", "BASELINE_KEYS", "DERIVED", "complete", "measured_rate", "in_figures", "baselines", "one_mode",
           "with_baselines", "workload_label", "data_name", "keyed"]

DEFAULT_WORKERS = JobSpec.__dataclass_fields__["workers"].default  # the kit recipe's loader workers
DEFAULT_AUTOTUNE = JobSpec.__dataclass_fields__["cudnn_autotune"].default  # the study's cuDNN autotuning

# jobs with equal values here do the same work with the same host allocation: a lone job given 12 loader workers is
# another baseline than one with 4 (the host-matched one, `attribution`). Its cores are not in the key: a job alone
# has every core the kit's process has (pinned: the cores its N collocated copies shared; unpinned: the OS's choice),
# so they tell lone jobs apart only across machines, where experiments differ anyway (`cores_allowed` in `load().jobs`)
WORKLOAD = ["model", "dataset", "data_root", "image_size", "batch_size", "amp", "recipe", "device", "workers",
            "cudnn_autotune"]
BASELINE_KEYS = ["experiment", *WORKLOAD]  # a baseline belongs to its experiment

DERIVED = ["baseline_images_per_s", "baseline_images_per_s_ci", "baseline_step_time_s", "baseline_peak_memory_mb",
           "baseline_steady_gpu_memory_mb", "baseline_jobs", "baseline_mode", "relative_throughput", "baseline_rel_ci",
           "epoch_time_growth", "baseline_note"]  # the columns `with_baselines` adds (replaced where already there)


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
    counted = (jobs["status"].to_numpy(dtype=object, na_value=None) == COMPLETE) & _known(jobs, "images_per_s")
    if "images_per_s_overlap" in jobs:
        counted |= _known(jobs, "images_per_s_overlap")
    return pd.Series(counted, index=jobs.index, dtype=bool)  # numpy, not pandas, ops: it is asked once per run


def _known(jobs: pd.DataFrame, column: str) -> np.ndarray:
    return ~pd.isna(jobs[column].to_numpy())


def keyed(jobs: pd.DataFrame) -> pd.DataFrame:
    """`jobs` with every `WORKLOAD` column: a frame made by hand or by an older kit without `workers` gets it empty
    (empty keys match each other in `baselines`' groups and `with_baselines`' merge), a job without `cudnn_autotune`
    the study's (`spec.JobSpec`: the kit ran no other before it asked), also where frames with and without the
    column were put together (`results.combine`): an empty value there would never match the lone job's "study"."""
    jobs = jobs if "workers" in jobs else jobs.assign(workers=math.nan)
    autotune = jobs["cudnn_autotune"].fillna(DEFAULT_AUTOTUNE) if "cudnn_autotune" in jobs else DEFAULT_AUTOTUNE
    return jobs.assign(cudnn_autotune=autotune)


def baselines(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, workload) run alone: mean images/s with its 95 % CI, step time, memory, count.

    The CI is over the lone jobs (repeats) where there are several, else the single job's within-run CI.

    >>> baselines(colloc_kit.load("runs").jobs)[["model", "baseline_images_per_s"]]   # doctest: +SKIP
    """
    columns = BASELINE_KEYS + ["baseline_images_per_s", "baseline_images_per_s_ci", "baseline_step_time_s",
                               "baseline_peak_memory_mb", "baseline_steady_gpu_memory_mb", "baseline_jobs",
                               "baseline_mode"]
    solo = complete(keyed(jobs))
    solo = solo[solo["alone"].astype(bool)] if len(solo) else solo
    if solo.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for keys, group in solo.groupby(BASELINE_KEYS, dropna=False, sort=False):
        group, mode = one_mode(group)
        mean, ci = ci95(group["images_per_s"])
        if len(group) == 1 and "images_per_s_ci" in group:
            ci = float(group["images_per_s_ci"].iloc[0])
        rows.append({**dict(zip(BASELINE_KEYS, keys)), "baseline_images_per_s": mean, "baseline_images_per_s_ci": ci,
                     "baseline_step_time_s": group["batch_size"].iloc[0] / mean,
                     "baseline_peak_memory_mb": group["peak_memory_mb"].median(),
                     "baseline_steady_gpu_memory_mb": _median(group, "steady_gpu_memory_mb"),
                     "baseline_jobs": len(group), "baseline_mode": mode})
    return pd.DataFrame(rows, columns=columns)


def one_mode(alone: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The lone jobs of one workload that make its baseline, and their mode: a baseline never pools modes (one job
    alone under exclusive and one time-sliced with nothing under naive ran differently, and on a GPU they differ);
    exclusive's where the experiment has them, else those of the mode that comes first by name.

    >>> alone = pd.DataFrame({"mode": ["naive", "exclusive", "exclusive"], "images_per_s": [5318.0, 6420.0, 6400.0]})
    >>> one_mode(alone)[0]["images_per_s"].tolist(), one_mode(alone)[1]
    ([6420.0, 6400.0], 'exclusive')
    """
    if "mode" not in alone or alone["mode"].isna().all():
        return alone, None
    modes = sorted(set(alone["mode"].dropna()))
    mode = "exclusive" if "exclusive" in modes else modes[0]
    return alone[alone["mode"] == mode], mode


def with_baselines(jobs: pd.DataFrame, reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """The jobs frame plus each job's baseline (and its relative CI, `baseline_rel_ci`), `relative_throughput` and
    `epoch_time_growth`.

    Baselines come from the lone jobs of the job's own experiment; a job whose experiment has none gets NaN and a
    `baseline_note` saying what to run. `reference`: a jobs frame to take baselines from instead (matched by workload
    alone, whatever its experiment), e.g. an earlier baseline experiment: an explicit choice, never a silent one.
    The columns it adds (`DERIVED`) are computed afresh where the frame already has them (`load()` joins them).
    """
    jobs = keyed(jobs.drop(columns=DERIVED, errors="ignore"))
    if jobs.empty:
        return jobs.assign(relative_throughput=pd.Series(dtype=float), epoch_time_growth=pd.Series(dtype=float))
    base = baselines(jobs if reference is None else keyed(reference))
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
    lacking = _labels(out, baseline.isna())
    out["baseline_note"] = [None if i not in lacking else f"no lone run of {lacking[i]} in {where}: add mode "
                            "exclusive with copies 1 to the experiment (or pass reference=)" for i in range(len(out))]
    return out


def _labels(jobs: pd.DataFrame, which: pd.Series) -> dict[int, str]:
    """The `workload_label` of the jobs `which` marks, by their position in `jobs` (the others are not labelled)."""
    positions = np.flatnonzero(which.to_numpy())
    return dict(zip(positions.tolist(), (workload_label(row) for _, row in jobs.iloc[positions].iterrows())))


def workload_label(row: Any) -> str:  # a jobs row (Series) or a dict of it
    """A short label such as 'resnet18 bs64 bf16': '... seed' for the seed study's recipe, '... on cifar10' for data
    other than synthetic (`data_name`), so that one model on two datasets gives two workloads; '... 12 workers' where
    it has loader workers and not its recipe's default number (a host-matched lone job).

    >>> workload_label({"model": "timm.resnet26", "batch_size": 128, "amp": "off", "recipe": "seed",
    ...                 "dataset": "imagefolder", "data_root": "/tmp/seed-data/cifar10", "workers": 12})
    'timm.resnet26 bs128 seed on cifar10 12 workers'
    """
    amp, recipe, data = row.get("amp"), row.get("recipe"), data_name(row.get("dataset"), row.get("data_root"))
    workers = row.get("workers")
    usual = RECIPE_DEFAULTS.get(recipe or "kit", {}).get("workers", DEFAULT_WORKERS)
    more = workers is not None and workers == workers and int(workers) not in (usual, 0)  # 0: loads in the job
    return (f"{row['model']} bs{int(row['batch_size'])}" + (f" {amp}" if amp and amp != "off" else "")
            + (f" {recipe}" if recipe and recipe != "kit" else "") + (f" on {data}" if data else "")
            + (f" {int(workers)} worker{'s' if workers != 1 else ''}" if more else ""))


def data_name(dataset: Any, data_root: Any) -> str | None:
    """The data a job reads, in one word: an image folder's name, or the dataset; None for synthetic images.

    >>> data_name("imagefolder", "/data/imagenet64"), data_name("cifar10", "/data"), data_name("synthetic", None)
    ('imagenet64', 'cifar10', None)
    """
    if dataset == "imagefolder" and isinstance(data_root, str) and data_root:
        return Path(data_root).name
    return dataset if isinstance(dataset, str) and dataset and dataset != "synthetic" else None


def _median(frame: pd.DataFrame, column: str) -> float:
    return frame[column].astype(float).median() if column in frame and frame[column].notna().any() else math.nan
