"""The kit's own cost compared within the host's state (issue 51): on an H200 a served model's latency alone sits in
one of two states, about 4-4.7 ms or about 7-8.6 ms a request, each held for seconds, in the plain loop and the kit
alike (`results/h200-cost/`). One arm's p50 against the other's then compares two states as often as two programs.

Each arm's requests (arrival and answer times, seconds) are cut into slices of `SLICE_S` by arrival; a slice's p50 is
*fast* when it is at most `FAST_FACTOR` times the fastest slices' p50 (their 5th percentile) over every pair of windows
of both arms of the model, else *slow*. Per model and state: each arm's p50 over its requests in that state's slices
of every pair, the kit's over the plain loop's with a 95 % CI from a bootstrap over the pairs, and how often each
arm was in that state. (Session 23's H200 pairs show the fast state is not one level, 4.4-6.2 ms: an arm that meets
its slower part more often looks slower within "fast" too; `results/h200/README.md`.)

    >>> fast = [[i * 0.01, i * 0.01 + 0.004] for i in range(100)]            # 1 s of 4-ms requests
    >>> slow = [[1 + i * 0.01, 1 + i * 0.01 + 0.008] for i in range(100)]    # then 1 s of 8-ms ones
    >>> rounds = [{"model": "m", "round": 0, "plain": fast + slow, "kit": fast + fast}]
    >>> row = state_table(rounds).set_index("state").loc["fast"]
    >>> float(row["kit_over_plain"]), float(row["plain_share"]), float(row["kit_share"])
    (0.0, 0.5, 1.0)
"""

from __future__ import annotations

import gzip
import json
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["BOOTSTRAP", "FAST_FACTOR", "SLICE_S", "STATES", "bootstrap_ci", "main", "slices", "state_table"]

SLICE_S = 0.5  # a slice of an arm's window, by arrival (the kit's interval)
MIN_REQUESTS = 5  # a slice with fewer requests has no p50 of its own
FAST_FACTOR = 1.4  # fast: within this factor of the fastest slices (the states differ by 1.5-2x)
BOOTSTRAP = 1000  # draws of the pairs for a ratio's CI
STATES = ("fast", "slow")


def slices(requests: Sequence[Sequence[float]]) -> list[list[float]]:
    """The latencies (ms) of `requests` ([arrival, answered] seconds), per `SLICE_S` slice of arrival, slices with
    fewer than `MIN_REQUESTS` left out.

    >>> [len(s) for s in slices([[i * 0.1, i * 0.1 + 0.002] for i in range(12)])]
    [5, 5]
    """
    if not requests:
        return []
    first = min(request[0] for request in requests)
    cut: dict[int, list[float]] = {}
    for arrival, answered, *_ in requests:  # (a request may carry its device time after them)
        cut.setdefault(int((arrival - first) / SLICE_S), []).append(1000.0 * (answered - arrival))
    return [cut[k] for k in sorted(cut) if len(cut[k]) >= MIN_REQUESTS]


def state_table(rounds: Sequence[dict], resamples: int = BOOTSTRAP) -> pd.DataFrame:
    """Per model and state (`rounds`: dicts of model, round (a pair of windows), and the two arms' requests under
    `plain` and `kit`): the pairs whose arms met that state, each arm's p50 over its requests in that state's slices
    of every pair (pooled: a pair whose arms met the state unevenly still counts), the kit's over the plain loop's
    minus 1 with its 95 % CI (a bootstrap over the pairs, `resamples` draws, seeded: the pair is the unit, its windows
    seconds apart), the state's share of each arm's slices, and the threshold between the states."""
    rows = []
    for model in dict.fromkeys(r["model"] for r in rounds):
        mine = [r for r in rounds if r["model"] == model]
        cut = [{arm: slices(r[arm]) for arm in ("plain", "kit")} for r in mine]
        p50s = sorted(statistics.median(s) for pair in cut for arm_slices in pair.values() for s in arm_slices)
        if not p50s:
            continue
        fast_below = FAST_FACTOR * p50s[int(0.05 * (len(p50s) - 1))]
        for state in STATES:
            kept = [{arm: [s for s in pair[arm] if (statistics.median(s) <= fast_below) == (state == "fast")]
                     for arm in pair} for pair in cut]  # per pair and arm: its slices in this state
            met = [pair for pair in kept if pair["plain"] or pair["kit"]]
            ratio, low, high = _pooled_ratio(met, resamples)
            share = {arm: sum(len(pair[arm]) for pair in kept) / max(1, sum(len(pair[arm]) for pair in cut))
                     for arm in ("plain", "kit")}
            rows.append({"model": model, "state": state, "pairs": len(met),
                         "plain_p50_ms": _pooled_p50(met, "plain"), "kit_p50_ms": _pooled_p50(met, "kit"),
                         "kit_over_plain": ratio - 1, "ci_low": low - 1, "ci_high": high - 1,
                         "plain_share": share["plain"], "kit_share": share["kit"], "fast_below_ms": fast_below})
    return pd.DataFrame(rows)


def _pooled_p50(pairs: Sequence[dict], arm: str) -> float:
    """The median of `arm`'s latencies over its slices in `pairs` (NaN: none)."""
    pooled = [x for pair in pairs for s in pair[arm] for x in s]
    return statistics.median(pooled) if pooled else math.nan


def _pooled_ratio(pairs: Sequence[dict], resamples: int) -> tuple[float, float, float]:
    """The kit's pooled p50 over the plain loop's with its bootstrap CI (`bootstrap_ci`; NaN where an arm has no
    slice)."""
    def ratio(drawn: Sequence[dict]) -> float:
        plain = _pooled_p50(drawn, "plain")
        return _pooled_p50(drawn, "kit") / plain if plain == plain else math.nan  # (NaN: plain met no slice)

    return bootstrap_ci(pairs, ratio, resamples)


def bootstrap_ci(pairs: Sequence[Any], statistic: Callable[[Sequence[Any]], float], resamples: int = BOOTSTRAP
                 ) -> tuple[float, float, float]:
    """`statistic(pairs)` and the 2.5th and 97.5th percentiles of it over `resamples` draws of the pairs with
    replacement (seeded: the same pairs give the same CI; draws where it is NaN left out; NaN bounds for none).

    >>> bootstrap_ci([1.0, 2.0, 3.0], lambda drawn: sum(drawn) / len(drawn))[0]
    2.0
    """
    point = statistic(pairs)
    rng = random.Random(0)
    draws = sorted(r for r in (statistic(rng.choices(pairs, k=len(pairs))) for _ in range(resamples)) if r == r)
    if not pairs or point != point or not draws:
        return point, math.nan, math.nan
    return point, draws[int(0.025 * (len(draws) - 1))], draws[int(0.975 * (len(draws) - 1))]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the states table of a cost folder's requests (`plain_vs_kit_requests.json`, or `.json.gz`) to stdout."""
    path = Path((argv if argv is not None else sys.argv[1:])[0])
    opened = gzip.open(path, "rt") if path.suffix == ".gz" else path.open()
    with opened as requests:
        print(state_table(json.load(requests)).to_csv(index=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
