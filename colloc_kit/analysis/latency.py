"""An inference job's figures (`role: serve`, colloc_kit.worker.serve), defined once; `figures` lists this module.

The rules:

- **Latency** of a request: from its arrival to its result on the host (queueing and batching included, the device
  synchronised). A job's latencies are those of the requests that *arrived* inside its window (the run's common
  window, or its own measured window when it ran alone); a request still queued when the job stopped counts with the
  time it had waited by then (a lower bound: a starved job's tail is never hidden by leaving its slowest requests out).
- **Percentiles** p50/p95/p99 are nearest-rank (the ceil(q n)-th smallest of n latencies). Their 95 % CI is the
  distribution-free one of order statistics: the ranks q n -+ 1.96 sqrt(n q (1 - q)) (binomial, normal
  approximation), which treats requests as independent, so, like every within-run CI of the kit, it is a lower
  bound on the run-to-run spread; where the upper rank passes n (too few requests for that tail) the upper bound
  is NaN and `latency_note` says how many requests the tail needs.
- **Parts of a latency** (where the job recorded them, `request_parts`): queueing (from arrival to its batch's
  start), device time (its batch's: CUDA events from the copy in to the classes; on the CPU the forward's wall time:
  `device_time` says which) and host time (the rest of its batch's service). `queue_p50_ms`, `host_p50_ms`,
  `device_p50_ms` are each part's median; `tail_queue_ms`, `tail_host_ms`, `tail_device_ms` each part's mean over the
  answered requests at or above the p99: what a p99 is made of.
- **Requests per second**: requests answered inside the window over its length; `answered_share`: those over the
  requests that arrived inside it (a Poisson draw of a few seconds may hold 10 % fewer or more than the rate offered:
  what was asked, not the rate's nominal value).
- **Share within the SLO**: of the requests that arrived in the window, those answered within the job's `slo`
  (unanswered ones miss it).
- **Latency slowdown**: the job's p99 over the p99 of the same serving workload alone in the same experiment (its
  lone baseline; NaN without one).
- **Starved**: an inference job whose p99 misses its SLO, or that answered less than `STARVED_SERVED_SHARE` of the
  requests that arrived in its window (`answered_share`, open loop); each run names its starved jobs
  (`serve_starved`). A run's training throughput
  beside it (`train_images_per_s`) is the sum of its training jobs' images/s in the common window.

    >>> stream = [{"type": "interval", "t": 10.0, "interval_s": 10.0, "interval_images": 3, "warmup": False,
    ...            "requests": [[1.0, 1.010], [2.0, 2.020], [3.0, 3.030]]}]
    >>> f = job_figures(stream, (0.0, 10.0), {"role": "serve", "slo": "25ms", "rate_per_s": 0.3})
    >>> round(f["latency_p50_ms"], 3), f["requests_per_s"], round(f["slo_share"], 3)
    (20.0, 0.3, 0.667)
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence, TypeGuard

import pandas as pd

from colloc_kit import events
from colloc_kit.serving import SERVE, TRAIN, slo_ms

__all__ = ["PARTS", "PERCENTILES", "REQUESTS_FOR_TOP_BOUND", "RUN_COLUMNS", "SERVE_KEYS", "STARVED_SERVED_SHARE",
           "ci_words", "job_figures", "latencies_ms", "per_run", "percentile_ci", "request_parts_ms", "run_latency",
           "with_lone_latency"]

PERCENTILES = (50, 95, 99)
PARTS = ("queue", "host", "device")  # a latency's parts, in the order a request meets them
Z95 = 1.959964
REQUESTS_FOR_TOP_BOUND = math.ceil(4 / (1 - PERCENTILES[-1] / 100))  # about what the top percentile's upper bound needs
STARVED_SERVED_SHARE = 0.9  # an open-loop job answering less than this share of its asked rate is starved
RUN_COLUMNS = ["train_images_per_s", "serve_p99_ms", "serve_starved"]  # the columns `per_run` adds to `load().runs`
SERVE_KEYS = ["model", "batch_size", "image_size", "amp", "device", "rate_per_s", "concurrency", "max_batch",
              "max_delay_ms"]  # the same serving workload (its lone baseline is one with equal values)


def latencies_ms(stream: Sequence[dict], window: tuple[float, float]) -> list[float]:
    """The latencies (ms) of the requests that arrived inside `window`, the still-queued ones as waited so far."""
    start, end = window
    answered = [done - arrival for e in stream if e.get("type") == events.INTERVAL
                for arrival, done in e.get("requests") or () if start <= arrival < end]
    last = next((e for e in reversed(stream) if e.get("type") == events.END), None)
    waiting = [last["t"] - arrival for arrival in last.get("unserved") or () if start <= arrival < end] if last else []
    return [1000.0 * s for s in answered + waiting]


def request_parts_ms(stream: Sequence[dict], window: tuple[float, float]) -> list[tuple[float, float, float, float]]:
    """(latency, queueing, host, device time), in ms, of each answered request that arrived inside `window` and has
    its parts recorded (`request_parts`, beside `requests`).

    >>> stream = [{"type": "interval", "requests": [[1.0, 1.010]], "request_parts": [[1.002, 6.0]]}]
    >>> [round(v, 3) for v in request_parts_ms(stream, (0.0, 2.0))[0]]
    [10.0, 2.0, 2.0, 6.0]
    """
    found = []
    for e in stream:
        if e.get("type") != events.INTERVAL:
            continue
        for (arrival, done), (began, device_ms) in zip(e.get("requests") or (), e.get("request_parts") or ()):
            if window[0] <= arrival < window[1]:
                found.append((1000 * (done - arrival), 1000 * (began - arrival), 1000 * (done - began) - device_ms,
                              device_ms))
    return found


def _parts_figures(parts: list[tuple[float, float, float, float]], p99: float, device: Any) -> dict:
    """Each part's median and its mean over the requests at or above the p99 (see the rules); {} without parts."""
    if not parts:
        return {}
    tail = [row for row in parts if row[0] >= p99]  # none: the p99 is a request still queued at the end
    row: dict[str, Any] = {"device_time": "cuda events" if str(device).startswith("cuda") else "cpu forward wall time"}
    for i, name in enumerate(PARTS, start=1):
        row[f"{name}_p50_ms"] = percentile_ci([p[i] for p in parts], 0.5)[0]
        row[f"tail_{name}_ms"] = sum(p[i] for p in tail) / len(tail) if tail else math.nan
    return row


def percentile_ci(values: Sequence[float], q: float) -> tuple[float, float, float]:
    """(nearest-rank q-quantile, lower, upper bound of its 95 % CI) of `values`; q in (0, 1).

    >>> percentile_ci(list(range(1, 1001)), 0.5)
    (500, 469, 531)
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan, math.nan, math.nan
    spread = Z95 * math.sqrt(n * q * (1 - q))
    low, high = math.floor(n * q - spread), math.ceil(n * q + spread)
    return (ordered[max(math.ceil(q * n), 1) - 1], ordered[max(low, 1) - 1],
            ordered[high - 1] if high <= n else math.nan)


def job_figures(stream: Sequence[dict], window: tuple[float, float] | None, spec: Mapping[str, Any]) -> dict:
    """An inference job's figures over `window` (see the rules above); a training job's row gets its role only."""
    role = spec.get("role") or TRAIN
    if role != SERVE:
        return {"role": role}
    slo = slo_ms(spec["slo"]) if spec.get("slo") else None
    row: dict[str, Any] = {"role": role, "slo_ms": slo, **{k: spec.get(k) for k in
                                                           ("rate_per_s", "concurrency", "max_batch", "max_delay_ms")}}
    if not window or window[1] <= window[0]:
        return {**row, "latency_note": "no window: the job never served past its warm-up"}
    values = latencies_ms(stream, window)
    for p in PERCENTILES:
        row[f"latency_p{p}_ms"], row[f"latency_p{p}_ms_lo"], row[f"latency_p{p}_ms_hi"] = percentile_ci(values, p / 100)
    served = sum(1 for e in stream if e.get("type") == events.INTERVAL
                 for _, done in e.get("requests") or () if window[0] <= done < window[1])
    row["requests_per_s"] = served / (window[1] - window[0])
    row["requests_in_window"] = len(values)
    row["answered_share"] = served / len(values) if values else None
    row.update(_parts_figures(request_parts_ms(stream, window), row["latency_p99_ms"], spec.get("device")))
    row["slo_share"] = sum(v <= slo for v in values) / len(values) if slo is not None and values else None
    row["latency_note"] = (f"{len(values)} requests: p99's upper bound needs about {REQUESTS_FOR_TOP_BOUND} or more"
                           if values and math.isnan(row[f"latency_p{PERCENTILES[-1]}_ms_hi"]) else None)
    return row


def run_latency(streams: Mapping[str, Sequence[dict]], specs: Mapping[str, Mapping[str, Any]],
                common: tuple[float, float] | None, own: Mapping[str, tuple[float, float] | None],
                alone_in_turn: bool) -> dict[str, dict]:
    """Each job's `job_figures` over its window: the run's common window (`common`: `figures.Window`'s bounds, None
    where it has none), or, for a job measured alone (alone in its run, or one after another) or a run without a
    common window (said in `latency_note`), its own measured window (`own`: `figures.steady_span(..., held=False)`
    of each job, as `figures.of_run` returns it)."""
    rows = {}
    for job, stream in streams.items():
        rows[job] = job_figures(stream, own[job] if alone_in_turn or not common else common, specs[job])
        if not (alone_in_turn or common) and own[job] and rows[job].get("role") == SERVE:
            rows[job]["latency_note"] = "no common window: over its own measured window (the jobs did not overlap)"
    return rows


def with_lone_latency(jobs: pd.DataFrame) -> pd.DataFrame:
    """`jobs` with `latency_p99_lone_ms` (the mean p99 of the same serving workload alone in its experiment) and
    `latency_slowdown` (p99 over it); unchanged where no job serves."""
    if "role" not in jobs or not (jobs["role"] == SERVE).any() or "latency_p99_ms" not in jobs:
        return jobs
    jobs = jobs.copy()
    workload = pd.Series(["|".join("" if pd.isna(v) else str(v) for v in row) for row in
                          jobs.reindex(columns=["experiment", *SERVE_KEYS]).itertuples(index=False)], index=jobs.index)
    alone = (jobs["role"] == SERVE) & jobs["alone"].astype(bool)
    lone = jobs["latency_p99_ms"][alone].groupby(workload[alone]).mean()
    jobs["latency_p99_lone_ms"] = workload.map(lone).where(jobs["role"] == SERVE)
    jobs["latency_slowdown"] = jobs["latency_p99_ms"] / jobs["latency_p99_lone_ms"]
    return jobs


def per_run(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per run: `train_images_per_s` (its training jobs in the common window, or alone their own rate), the
    inference jobs' `serve_p99_ms` (the worst), and `serve_starved`, naming each starved job and why. Computed a
    column at a time over all runs (a folder of the seed study holds hundreds).

    >>> jobs = pd.DataFrame({"run_id": ["a", "a", "b"], "role": [TRAIN, SERVE, TRAIN], "job": ["t", "s", "t"],
    ...                      "images_per_s_overlap": [90.0, None, None], "images_per_s": [100.0, None, 80.0],
    ...                      "latency_p99_ms": [None, 30.0, None], "slo_ms": [None, 25.0, None]})
    >>> table = per_run(jobs)
    >>> table["run_id"].tolist(), table["train_images_per_s"].tolist(), table["serve_p99_ms"].fillna(0).tolist()
    (['a', 'b'], [90.0, 80.0], [30.0, 0.0])
    >>> table["serve_starved"].tolist()
    ['s starved: p99 30.0 ms > SLO 25 ms', nan]
    """
    serving = (jobs["role"] == SERVE) if "role" in jobs else pd.Series(False, index=jobs.index)
    rates = jobs["images_per_s_overlap"].astype(float).fillna(jobs["images_per_s"].astype(float)).where(~serving)
    p99 = jobs["latency_p99_ms"].where(serving) if "latency_p99_ms" in jobs else pd.Series(math.nan, index=jobs.index)
    starved = pd.Series([_starved(row) for row in jobs[serving].to_dict("records")], index=jobs.index[serving],
                        dtype=object).reindex(jobs.index)
    table = pd.DataFrame({"rate": rates, "p99": p99, "starved": starved}).groupby(jobs["run_id"], sort=False)
    rate = table["rate"].sum()  # a run's rows in the order its first job comes
    why = ["; ".join(starved_jobs.dropna()) or None for _, starved_jobs in table["starved"]]  # in rate's order
    return pd.DataFrame({"run_id": rate.index, "train_images_per_s": rate.astype(float).to_numpy(),
                         "serve_p99_ms": table["p99"].max().to_numpy(), "serve_starved": why})


def _starved(row: Mapping[str, Any]) -> str | None:
    """Why an inference job is starved (see the rules), or None."""
    why = []
    p99, slo = row.get("latency_p99_ms"), row.get("slo_ms")
    if _known(p99) and _known(slo) and p99 > slo:
        why.append(f"p99 {p99:.1f} ms > SLO {slo:g} ms")
    share = row.get("answered_share")
    if _known(row.get("rate_per_s")) and _known(share) and share < STARVED_SERVED_SHARE:
        why.append(f"answered {share:.0%} of the requests that arrived")
    return f"{row['job']} starved: {', '.join(why)}" if why else None


def _known(value: Any) -> TypeGuard[float]:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def ci_words(low: float | None, high: float | None) -> str:
    """A percentile's 95 % CI (its bounds, ms) in words, for a sentence or a hover; an order statistic has no bound
    where too few requests lie beyond it.

    >>> ci_words(6.3, 14.0), ci_words(6.3, float("nan")), ci_words(None, None)
    ('95 % CI 6.3-14.0', '95 % CI from 6.3; too few requests for its upper bound', 'too few requests for its 95 % CI')
    """
    known = [bool(pd.notna(v)) for v in (low, high)]
    if all(known):
        return f"95 % CI {low:.1f}-{high:.1f}"
    if known[0]:
        return f"95 % CI from {low:.1f}; too few requests for its upper bound"
    if known[1]:
        return f"95 % CI up to {high:.1f}; too few requests for its lower bound"
    return "too few requests for its 95 % CI"
