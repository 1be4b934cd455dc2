"""The kit's own cost split into the GPU's part and the host's (issue 51): each request of the cost's pairs carries
its device time (CUDA events from the copy in to the classes, in the kit's server and in the plain loop alike; on the
CPU the request's wall time), and its host time is the rest of its latency. Both arms run the same model on the same
requests, so what the kit adds can only be host time, while the device time moves with the GPU's and the host's
state from one window to the next (`host_state`). Per model: each arm's p50 of latency, device and host time over
every pair's requests, and the kit's host p50 minus the plain loop's over the plain loop's latency p50 (the share
of a request the kit adds), with its 95 % CI from a bootstrap over the pairs (`host_state.bootstrap_ci`).

    >>> pairs = [{"model": "m", "plain": [[0.0, 0.0050, 4.8]], "kit": [[0.0, 0.0051, 4.8]]}]  # 0.1 ms more host
    >>> round(float(parts_table(pairs).iloc[0]["kit_added_share"]), 3)
    0.02

The kit's arm alone bounds what it adds, since the plain loop's host time is at least 0: its whole host time (the
server's own code, outside the forward) over its latency. From cost folders' runs (extracted `runs.tgz`), a row per
served model:

    python3 benchmarks/inference/cost_parts.py /tmp/cost-a/runs/cost-*
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from colloc_kit.analysis.latency import percentile_ci
from colloc_kit.store.rundir import read_events
from host_state import bootstrap_ci  # a sibling: on sys.path when the benchmark runs

__all__ = ["SPLIT", "kit_parts", "main", "p50_ms", "parts_table", "window_requests"]

ARMS = ("plain", "kit")
SPLIT = {  # a part's ms of one request [arrival, answered (seconds), device ms]
    "latency": lambda request: 1000.0 * (request[1] - request[0]),
    "device": lambda request: request[2],
    "host": lambda request: 1000.0 * (request[1] - request[0]) - request[2],
}


def parts_table(pairs: Sequence[dict]) -> pd.DataFrame:
    """Per model (`pairs`: dicts of model and the two arms' requests under `plain` and `kit`; pairs whose requests do
    not all carry a device time are left out): the pairs compared, each arm's p50 of each part, and the share of the
    plain loop's latency p50 that the kit's host time adds (`kit_added_share`) with its 95 % CI."""
    rows = []
    for model in dict.fromkeys(pair["model"] for pair in pairs):
        timed = [pair for pair in pairs if pair["model"] == model and all(
            pair[arm] and all(len(r) > 2 and r[2] is not None for r in pair[arm]) for arm in ARMS)]
        share, low, high = bootstrap_ci(timed, _added_share)
        row: dict = {"model": model, "pairs": len(timed)}
        for arm in ARMS:
            for part in SPLIT:
                row[f"{arm}_{part}_p50_ms"] = _p50(timed, arm, part)
        rows.append({**row, "kit_added_share": share, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)


def p50_ms(requests: Sequence[Sequence[Any]], part: str = "latency") -> float:
    """The p50 (ms; nearest-rank, as the kit's: `analysis.latency`) of one part of `requests` ([arrival, answered]
    seconds, then device ms), for both arms alike; NaN for none.

    >>> p50_ms([[0.0, 0.25], [1.0, 1.5], [2.0, 2.125]])            # 250, 500 and 125 ms
    250.0
    """
    return percentile_ci([SPLIT[part](request) for request in requests], 0.5)[0]


def _p50(pairs: Sequence[dict], arm: str, part: str) -> float:
    """`p50_ms` of one part over `arm`'s requests in `pairs`."""
    return p50_ms([request for pair in pairs for request in pair[arm]], part)


def _added_share(pairs: Sequence[dict]) -> float:
    """(the kit's host p50 - the plain loop's) / the plain loop's latency p50, over `pairs`."""
    return (_p50(pairs, "kit", "host") - _p50(pairs, "plain", "host")) / _p50(pairs, "plain", "latency")


def window_requests(run_dir: Path) -> list[list[float]]:
    """[arrival, answered (seconds, the kit's clock), device time (ms; None where the run did not record it)] of
    each request of a run's measured window."""
    return [[*request, part[1]] for events_file in run_dir.glob("jobs/*.events.jsonl")
            for event in read_events(events_file)
            if event.get("type") == "interval" and not event.get("warmup") and not event.get("held")
            for request, part in zip(event.get("requests") or (),
                                     event.get("request_parts") or [[None, None]] * len(event.get("requests") or ()))]


def kit_parts(experiment: Path) -> dict:
    """The kit's arm alone, over every measured window of a cost experiment's runs (`runs/cost-MODEL`): requests,
    the p50 of each part and its host p50 over its latency p50 (`host_share`: at least what the kit adds)."""
    windows = [{"kit": window_requests(run)} for run in sorted(experiment.glob("*/")) if (run / "jobs").is_dir()]
    row: dict = {"experiment": str(experiment), "windows": len(windows),
                 "requests": sum(len(window["kit"]) for window in windows)}
    row.update({f"{part}_p50_ms": _p50(windows, "kit", part) for part in SPLIT})
    return {**row, "host_share": row["host_p50_ms"] / row["latency_p50_ms"]}


def main(argv: Sequence[str] | None = None) -> int:
    """Print `kit_parts` of each cost experiment folder given, as CSV."""
    folders = argv if argv is not None else sys.argv[1:]
    print(pd.DataFrame([kit_parts(Path(folder)) for folder in folders]).to_csv(index=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
