"""One job with more loader workers, predicted from its lone run: the host's part of a collocation's gain.

N copies of a job bring N times its loader workers. A job that waits for its input alone (`LoneProfile.input_bound`)
gains from those workers without sharing the GPU at all (`docs/attribution.md`). The model, from the lone run only:
the lone rate grows with the loader workers (those beyond the host's cores add nothing) until the GPU caps it, at the
lone rate over the GPU's busy share alone (the rate at which the GPU would never wait for a batch):

    rate(W') = min(rate x min(W', cores) / W,  rate / gpu_busy)

Held against the shipped H100 host-matched runs (`h100-attribution`) by `benchmarks/predict/predict_validation.py`.

    >>> p = LoneProfile("r26", 1749.0, gpu_busy=0.634, input_wait=0.76, job={"workers": 4})
    >>> guess = more_workers(p, 12)
    >>> round(guess.images_per_s), guess.binding
    (2759, 'the GPU (busy 63 % alone)')
    >>> round(host_explains(gain=1.80, host_part=guess.gain), 2)   # of a gain of 1.80, in log terms
    0.78
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from colloc_kit.analysis.results import Results
from colloc_kit.predict.check import profiles
from colloc_kit.predict.model import H100, LoneProfile, Target

__all__ = ["MoreWorkers", "WorkersPrediction", "more_workers", "host_explains", "held_out", "ERROR_BAND"]

ERROR_BAND = 0.10  # advise's band: the largest held-out error on h100-attribution (9.6 %, of only 3 workloads)


@dataclass(frozen=True)
class MoreWorkers:
    """An advise row's configuration: one job of `workload` alone with `workers` loader workers (mode exclusive)."""

    workload: str
    workers: int
    mode: str = "exclusive"

    @property
    def jobs(self) -> tuple[str, ...]:
        """The one job, as a Config's jobs."""
        return (self.workload,)

    @property
    def label(self) -> str:
        """e.g. 'one job, 12 loader workers'."""
        return f"one job, {self.workers} loader workers"


@dataclass(frozen=True)
class WorkersPrediction:
    """A lone job's predicted images/s with `workers` loader workers, its gain over the lone run and what caps it."""

    workers: int
    images_per_s: float
    gain: float
    binding: str
    why: str


def more_workers(lone: LoneProfile, workers: int, target: Target = H100) -> WorkersPrediction:
    """The lone rate with `workers` loader workers instead of the lone run's own (`lone.job['workers']`)."""
    own = int(lone.job.get("workers") or 0)
    if own < 1:
        raise ValueError(f"{lone.workload}: its lone run loaded in its own process (0 workers): no rate to scale")
    usable = min(workers, target.host_cores)
    scaled = lone.images_per_s * usable / own
    busy = lone.gpu_busy if lone.gpu_busy else 1.0
    cap = lone.images_per_s / busy
    rate = min(scaled, cap)
    if scaled <= cap:
        binding = "host cores" if workers > target.host_cores else "loader workers"
    else:
        binding = f"the GPU (busy {busy * 100:.0f} % alone)"
    why = (f"alone with {own} workers: {lone.images_per_s:,.0f} img/s, GPU busy {busy:.0%}; x {usable}/{own} workers "
           f"= {scaled:,.0f}; the GPU caps it at {lone.images_per_s:,.0f} / {busy:.2f} = {cap:,.0f}: "
           f"{rate:,.0f} img/s (predicted)")
    return WorkersPrediction(workers, rate, rate / lone.images_per_s, binding, why)


def host_explains(gain: float, host_part: float) -> float:
    """The share of a gain (in log terms) that a host's part explains: log(host_part) / log(gain); NaN where the
    gain is not above 1. Above 1: one job with more workers gains more than the collocation."""
    if not gain > 1.0 or not host_part == host_part:
        return math.nan
    return math.log(host_part) / math.log(gain)


def held_out(results: Results, target: Target = H100) -> pd.DataFrame:
    """Per workload with both lone baselines in `results` (same job, more loader workers: the host-matched run,
    one row for each), the host-matched rate predicted from the as-configured lone run (the job's run with the
    fewest workers) beside the measured one. Nothing is fitted, so every row is held out."""
    rows = []
    for experiment in sorted(results.jobs["experiment"].dropna().unique()):
        lone = profiles(results, experiment)
        for base in lone.values():
            same = [other for other in lone.values() if _task(other) == _task(base)]
            if any(_workers(other) < _workers(base) for other in same):  # a host-matched run: not the base
                continue
            for other in same:
                if not _workers(other) > _workers(base) > 0:
                    continue
                guess = more_workers(base, int(other.job["workers"]), target)
                rows.append({"experiment": experiment, "workload": base.workload,
                             "workers": int(base.job["workers"]), "host_matched_workers": guess.workers,
                             "configured": base.images_per_s, "predicted": guess.images_per_s,
                             "measured": other.images_per_s, "error": guess.images_per_s / other.images_per_s - 1,
                             "binding": guess.binding})
    return pd.DataFrame(rows)


def _workers(lone: LoneProfile) -> int:
    return int(lone.job.get("workers") or 0)


def _task(lone: LoneProfile) -> dict:
    """The lone job's fields but its loader workers: what a host-matched run shares with its configured one."""
    return {k: v for k, v in lone.job.items() if k != "workers"}
