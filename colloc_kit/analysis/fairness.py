"""Who lost when jobs shared a device, and whether each job had the share it was given.

Two figures beside the gain (rules in `figures`: "Fairness", "Asked vs had"); `results.load` joins both
onto its frames, `analysis` recomputes them where baselines are borrowed (`reference=`):

- **Fairness**, per run: Jain's index over its jobs' relative throughputs (each job's images/s in the common window
  over its workload's lone images/s in the same experiment: `jain_index`), each job's slowdown (its
  `epoch_time_growth`: lone images/s over its own), the least and most slowed down, and the job that lost most.
  Jobs that did not share (alone, or one after another) have no index; a run whose jobs lack a lone baseline has
  none either, and `fairness_note` says what to run. The spread between identical jobs of one run belongs here,
  not to noise: noise is judged from repeats of a cell and the baseline's CI (`analysis.noise`).
- **Asked vs had**, per job with a configured share: `share_asked_pct`, the share of the card's SMs its slot was
  given (an MPS active thread percentage, a thread limit or an MPS partition; a MIG instance's SMs over the card's),
  beside `share_had_pct`, 100 x its relative throughput.

Why the share had comes from throughput, not from NVML: the kit's monitor (`monitor/processes.py`) records each GPU
process's SM use where NVML gives it, and NVML gives none that is a job's own under sharing: under MPS it charges every
client's SM activity to the MPS server process (the clients' rows carry their memory only), and on MIG it has no
per-process utilization at all. So a job's share is read from what it trained: its images/s against its lone run on
the whole card. That is a share of throughput, not of SMs: a job bound by its input pipeline or host keeps all its
lone speed on fewer SMs (had above asked: the cap did not bind); had below asked means it got less than its slice
would give a job whose speed scales with SMs (the others' load on memory bandwidth and caches, which MPS partitions do
not isolate, or a cap that binds harder than its share).

    >>> run = pd.DataFrame({"run_id": "r", "job": ["j0", "j1"], "sequential": False, "status": "complete",
    ...                     "images_per_s": [90.0, 45.0], "relative_throughput": [0.9, 0.45],
    ...                     "epoch_time_growth": [1 / 0.9, 1 / 0.45]})
    >>> row = per_run(run).iloc[0]
    >>> round(float(row["fairness_index"]), 3), round(float(row["slowdown_max"]), 2), row["least_served"]
    (0.9, 2.22, 'j1')
    >>> round(asked_share_pct({"slot_profile": "3g.40gb"}, "NVIDIA H100 80GB HBM3"), 1)   # 60 of 132 SMs
    45.5
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import pandas as pd

from colloc_kit.analysis.lone import in_figures
from colloc_kit.errors import BadInput
from colloc_kit.gpu.mig_catalogue import model_for_device, resolve

__all__ = ["RUN_COLUMNS", "JOB_COLUMNS", "SHARE_COLUMNS", "asked_share_pct", "jain_index", "with_shares", "per_run",
           "run_fairness"]

RUN_COLUMNS = ["fairness_index", "slowdown_min", "slowdown_max", "slowdowns", "least_served", "fairness_note"]
JOB_COLUMNS = ["job", "status", "sequential", "images_per_s", "images_per_s_overlap", "relative_throughput",
               "epoch_time_growth"]  # what `run_fairness` reads of a run's jobs
SHARE_COLUMNS = ["share_asked_pct", "share_had_pct"]


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index of non-negative values (NaN and None left out): (sum x)^2 / (n sum x^2), from 1/n (one
    value holds everything) to 1 (all equal); NaN with no value above zero.

    >>> jain_index([1.0, 1.0]), jain_index([1.0, 0.0]), round(jain_index([0.9, 0.45, 0.45]), 3)
    (1.0, 0.5, 0.889)
    """
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if any(x < 0 for x in xs):
        raise ValueError(f"Jain's index is defined for non-negative values, got {min(xs)}")
    squares = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * squares) if squares > 0 else math.nan


def asked_share_pct(slot: Mapping, gpu_name: str | None = None) -> float | None:
    """The share of the card's SMs a job's slot was configured to have, in percent: its MPS active thread percentage
    (`slot_thread_percentage`), a MIG instance's SMs over the card's (`slot_profile`, on a card with a built-in MIG
    table), their product for MPS inside a MIG instance; None for a slot without one (naive, MPS without limits).

    >>> asked_share_pct({"slot_thread_percentage": 42.0}), asked_share_pct({"slot_label": "naive-0"})
    (42.0, None)
    """
    share: float | None = None
    profile = slot.get("slot_profile")
    if isinstance(profile, str) and profile:
        card = model_for_device(str(gpu_name or slot.get("gpu_name") or ""))
        if card is None:
            return None  # a card without a built-in MIG table: its SM count per profile is not known
        try:
            share = 100.0 * resolve(profile, card).sm_count / card.sm_count
        except BadInput:
            return None
    thread = slot.get("slot_thread_percentage")
    if thread is not None and _number(thread):
        share = float(thread) if share is None else share * float(thread) / 100
    return share


def with_shares(jobs: pd.DataFrame) -> pd.DataFrame:
    """The jobs frame (with `relative_throughput`, `lone.with_baselines`) plus `share_asked_pct` and
    `share_had_pct` (100 x the relative throughput, where a share was asked); recomputed where already there."""
    jobs = jobs.drop(columns=SHARE_COLUMNS, errors="ignore")
    if jobs.empty:
        return jobs.assign(**{c: pd.Series(dtype=float) for c in SHARE_COLUMNS})
    asked = pd.Series([asked_share_pct(row) for row in jobs.to_dict("records")], index=jobs.index, dtype=float)
    had = 100 * jobs["relative_throughput"].astype(float) if "relative_throughput" in jobs else math.nan
    return jobs.assign(share_asked_pct=asked, share_had_pct=pd.Series(had, index=jobs.index).where(asked.notna()))


def per_run(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per run of the jobs frame (with baselines): `run_id` and `RUN_COLUMNS` (`run_fairness`)."""
    read = jobs[[c for c in ["run_id", *JOB_COLUMNS] if c in jobs]]  # a run's rows cut from these columns only
    rows = [{"run_id": run_id, **run_fairness(run)} for run_id, run in read.groupby("run_id", sort=False)]
    return pd.DataFrame(rows, columns=["run_id", *RUN_COLUMNS])


def run_fairness(run: pd.DataFrame) -> dict:
    """One run's fairness: Jain's index over the relative throughputs of the jobs that trained in its common window,
    their slowdowns (min, max, and each as 'job 1.23x'), the job slowed down most, and a note where the index is
    missing although the jobs shared (no baseline, jobs left out)."""
    out: dict = {"fairness_index": math.nan, "slowdown_min": math.nan, "slowdown_max": math.nan, "slowdowns": None,
                 "least_served": None, "fairness_note": None}
    if run.empty or bool(run["sequential"].iloc[0]):  # one after another: each job had the device alone
        return out
    counted = run[in_figures(run)]
    slow = counted["epoch_time_growth"].astype(float).set_axis(counted["job"]).dropna() if len(counted) else pd.Series()
    if len(slow):
        out.update(slowdown_min=float(slow.min()), slowdown_max=float(slow.max()), least_served=str(slow.idxmax()),
                   slowdowns=", ".join(f"{job} {value:.2f}x" for job, value in slow.sort_index().items()))
    notes = []
    left_out = sorted(set(run["job"]) - set(counted["job"]))
    if left_out and len(run) > 1:
        notes.append(f"{', '.join(left_out)} left out: did not train in the common window")
    if len(counted) > 1 and len(slow) == len(counted):
        out["fairness_index"] = jain_index(counted["relative_throughput"])
    elif len(counted) > 1:
        lacking = sorted(set(counted["job"]) - set(slow.index))
        notes.append(f"no index: no lone baseline for {', '.join(lacking)}")
    out["fairness_note"] = "; ".join(notes) or None
    return out


def _number(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
