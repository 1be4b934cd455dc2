"""The one noise rule, by comparison: a page's figures are greyed as no result only where the differences they show
lie within the noise: no gain of a shared cell has a 95 % CI that leaves 1 (one job alone; the gain's CI carries its
lone baseline's). A gain far outside its baseline's CI is drawn and read, with its CI, whatever the repeats' spread.
Impossible numbers grey a page always, said the same way on every page (notebook 10 included): a configuration
gaining more than its jobs can give (`summaries.noise`), a job faster shared than alone beyond both CIs, an inference
job's p99 lower shared than alone beyond both CIs.

    >>> summary = pd.DataFrame({"mode": ["mps", "mps"], "copies": [1, 3], "normalized_throughput_mean": [1.0, 2.05],
    ...                         "normalized_throughput_ci": [0.1, 0.29]})
    >>> outside_noise(summary).tolist()
    [False, True]
"""

from __future__ import annotations

import math

import pandas as pd

from colloc_kit.analysis.lone import with_baselines, workload_label
from colloc_kit.analysis.summaries import NOISE_LIMIT, impossible_gain, noise

__all__ = ["IMPOSSIBLE", "outside_noise", "impossible_jobs", "impossible_latency", "impossible", "greyed"]

IMPOSSIBLE = "impossible numbers"  # how the flags of a job faster or a p99 lower shared than alone start


def outside_noise(summary: pd.DataFrame) -> pd.Series:
    """Per summary row: whether jobs shared the card (more than one job) and the gain's 95 % CI leaves 1, so the
    difference from one job alone lies outside the noise; False where the CI is unknown."""
    if summary is None or summary.empty or "normalized_throughput_ci" not in summary:
        return pd.Series(False, index=getattr(summary, "index", None), dtype=bool)
    jobs = summary["n_jobs"] if "n_jobs" in summary else summary["copies"]
    gain = summary["normalized_throughput_mean"].astype(float)
    ci = summary["normalized_throughput_ci"].astype(float)
    return (jobs.astype(float) > 1) & ci.notna() & ((gain - 1).abs() > ci)


def impossible_jobs(jobs: pd.DataFrame) -> str | None:
    """The training job of a shared run that was fastest against its lone run, where its relative throughput's
    lower bound (its own within-run CI and its baseline's, combined) is above 1: a job cannot train faster beside
    others than alone; None where none is."""
    if jobs is None or jobs.empty or "alone" not in jobs:
        return None
    frame = jobs if "baseline_rel_ci" in jobs else with_baselines(jobs)
    training = frame["role"].ne("serve") if "role" in frame else pd.Series(True, index=frame.index)
    shared = frame[training & ~frame["alone"].astype(bool)
                   & (frame.groupby("run_id")["run_id"].transform("size") > 1)]
    if shared.empty or "relative_throughput" not in shared:
        return None
    own = (shared["images_per_s_ci"].astype(float) / shared["images_per_s"].astype(float)
           if "images_per_s_ci" in shared else pd.Series(0.0, index=shared.index))
    spread = (own.fillna(0.0) ** 2 + shared["baseline_rel_ci"].astype(float) ** 2).pow(0.5)
    low = shared["relative_throughput"].astype(float) * (1 - spread)
    if not (low > 1).any():
        return None
    row = shared.loc[low.idxmax()]
    return (f"{IMPOSSIBLE}: {workload_label(row)} in {row['experiment']} {row.get('mode_label', row['mode'])} "
            f"x{int(row['copies'])} trained {row['relative_throughput']:.2f}x its lone speed (± "
            f"{100 * spread[low.idxmax()]:.0f} %), faster beside other jobs than alone beyond both CIs: the lone run "
            "or this one was disturbed (a busy or drifting host); measure them again, close together in time")


def impossible_latency(jobs: pd.DataFrame) -> str | None:
    """The inference job whose p99 shared was lowest against its p99 alone where both CIs say it was lower (its
    upper bound under the lone run's lower bound): a server cannot answer faster beside training than alone."""
    needed = {"role", "alone", "latency_p99_ms_hi", "latency_p99_ms_lo"}
    if jobs is None or jobs.empty or not needed <= set(jobs):
        return None
    serve = jobs[jobs["role"] == "serve"]
    alone = serve[serve["alone"].astype(bool)]
    shared = serve[~serve["alone"].astype(bool)]
    found = []
    for _, row in shared.iterrows():
        lone = alone[alone["model"] == row["model"]] if "model" in alone else alone
        floor = lone["latency_p99_ms_lo"].astype(float).min() if len(lone) else math.nan
        if row["latency_p99_ms_hi"] < floor:
            found.append(f"{IMPOSSIBLE}: {row['job']}'s p99 shared, {row['latency_p99_ms']:.1f} ms, is below its p99 "
                         f"alone beyond both CIs (at most {row['latency_p99_ms_hi']:.1f} ms against at least "
                         f"{floor:.1f} ms alone): measure them again, close together in time")
    return found[0] if found else None


def impossible(jobs: pd.DataFrame, summary: pd.DataFrame | None = None, limit: float = NOISE_LIMIT) -> str | None:
    """Every impossible number of a page, in one warning (None where there is none): a configuration gaining more
    than its jobs can give (`summary`), a training job faster shared than alone, a p99 lower shared than alone."""
    gained = impossible_gain(summary, limit) if summary is not None and len(summary) else None
    return "; ".join(w for w in (gained, impossible_jobs(jobs), impossible_latency(jobs)) if w) or None


def greyed(jobs: pd.DataFrame, summary: pd.DataFrame | None = None, limit: float = NOISE_LIMIT) -> str | None:
    """The page's noise warning where it greys the page's figures as no result (`views.style.noisy`), else None:
    impossible numbers always; the repeats' spread or an imprecise lone run (`summaries.noise`) only where no gain
    of `summary` lies outside the noise (`outside_noise`)."""
    flagged = impossible(jobs, summary, limit)
    if flagged:
        return flagged
    warning = noise(jobs, None, limit)
    if warning is None or (summary is not None and outside_noise(summary).any()):
        return None
    return warning
