"""The kit's own cost compared within the host's state (issue 51): on an H200 a served model's latency alone sits in
one of two states, about 4-4.7 ms or about 7-8.6 ms a request, each held for seconds, in the plain loop and the kit
alike (`results/h200-cost/`). One arm's p50 against the other's then compares two states as often as two programs.

Each arm's requests (arrival and answer times, seconds) are cut into slices of `SLICE_S` by arrival; a slice's p50 is
*fast* when it is at most `FAST_FACTOR` times the fastest slices' p50 (their 5th percentile) over every round of both
arms of the model, else *slow*. Per round and arm: the share of fast slices and each state's p50 (the median of the
requests in that state's slices). Per model and state: the kit's p50 over the plain loop's, round by round where both
arms spent `MIN_SLICES` slices in that state, its mean with the 95 % CI, and how often each arm was in that state:

    >>> fast = [[i * 0.01, i * 0.01 + 0.004] for i in range(100)]            # 1 s of 4-ms requests
    >>> slow = [[1 + i * 0.01, 1 + i * 0.01 + 0.008] for i in range(100)]    # then 1 s of 8-ms ones
    >>> rounds = [{"model": "m", "round": 0, "plain": fast + slow, "kit": fast + fast}]
    >>> row = state_table(rounds).set_index("state").loc["fast"]
    >>> float(row["kit_over_plain"]), float(row["plain_share"]), float(row["kit_share"])
    (0.0, 0.5, 1.0)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import pandas as pd

from colloc_kit.stats import ci95

__all__ = ["FAST_FACTOR", "MIN_SLICES", "SLICE_S", "STATES", "arm_states", "slices", "state_table"]

SLICE_S = 0.5  # a slice of an arm's window, by arrival (the kit's interval)
MIN_REQUESTS = 5  # a slice with fewer requests has no p50 of its own
FAST_FACTOR = 1.4  # fast: within this factor of the fastest slices (the states differ by 1.5-2x)
MIN_SLICES = 2  # a round compares a state both arms spent at least this many slices in
STATES = ("fast", "slow")


def slices(requests: Sequence[Sequence[float]]) -> list[list[float]]:
    """The latencies (ms) of `requests` ([arrival, answered] seconds), per `SLICE_S` slice of arrival, slices with
    fewer than `MIN_REQUESTS` left out.

    >>> [len(s) for s in slices([[i * 0.1, i * 0.1 + 0.002] for i in range(12)])]
    [5, 5]
    """
    if not requests:
        return []
    first = min(arrival for arrival, _ in requests)
    cut: dict[int, list[float]] = {}
    for arrival, answered in requests:
        cut.setdefault(int((arrival - first) / SLICE_S), []).append(1000.0 * (answered - arrival))
    return [cut[k] for k in sorted(cut) if len(cut[k]) >= MIN_REQUESTS]


def arm_states(latency_slices: list[list[float]], fast_below_ms: float) -> dict[str, float]:
    """One arm of one round: the share of its slices in the fast state, each state's p50 (ms, NaN if none) and its
    number of slices."""
    by_state = {state: [s for s in latency_slices if (statistics.median(s) <= fast_below_ms) == (state == "fast")]
                for state in STATES}
    row = {"fast_share": len(by_state["fast"]) / len(latency_slices) if latency_slices else float("nan")}
    for state, kept in by_state.items():
        row[f"{state}_slices"] = len(kept)
        row[f"{state}_p50_ms"] = statistics.median(x for s in kept for x in s) if kept else float("nan")
    return row


def state_table(rounds: Sequence[dict]) -> pd.DataFrame:
    """Per model and state (`rounds`: dicts of model, round, and the two arms' requests under `plain` and `kit`):
    rounds compared, each arm's median p50 in that state over them, the kit's p50 over the plain loop's (mean of the
    rounds' ratios, minus 1) with its 95 % CI, the state's share of each arm's slices over all rounds, and the
    threshold between the states."""
    rows = []
    for model in dict.fromkeys(r["model"] for r in rounds):
        mine = [r for r in rounds if r["model"] == model]
        cut = {(r["round"], arm): slices(r[arm]) for r in mine for arm in ("plain", "kit")}
        p50s = sorted(statistics.median(s) for arm_slices in cut.values() for s in arm_slices)
        if not p50s:
            continue
        fast_below = FAST_FACTOR * p50s[int(0.05 * (len(p50s) - 1))]
        states = {key: arm_states(arm_slices, fast_below) for key, arm_slices in cut.items()}
        for state in STATES:
            paired = [(states[(r["round"], "plain")], states[(r["round"], "kit")]) for r in mine
                      if min(states[(r["round"], a)][f"{state}_slices"] for a in ("plain", "kit")) >= MIN_SLICES]
            ratio, half = ci95([k[f"{state}_p50_ms"] / p[f"{state}_p50_ms"] for p, k in paired])
            share = {arm: sum(states[(r["round"], arm)][f"{state}_slices"] for r in mine)
                     / max(1, sum(len(cut[(r["round"], arm)]) for r in mine)) for arm in ("plain", "kit")}
            rows.append({"model": model, "state": state, "rounds_compared": len(paired),
                         "plain_p50_ms": statistics.median(p[f"{state}_p50_ms"] for p, _ in paired) if paired
                         else float("nan"),
                         "kit_p50_ms": statistics.median(k[f"{state}_p50_ms"] for _, k in paired) if paired
                         else float("nan"),
                         "kit_over_plain": ratio - 1, "ci95": half, "plain_share": share["plain"],
                         "kit_share": share["kit"], "fast_below_ms": fast_below})
    return pd.DataFrame(rows)
