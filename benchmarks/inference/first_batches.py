"""Why a served p99 is what it is (issue 51): per run of an inference job, each batch size's (requests a batch)
first batch inside the window against that size's median device time, and how many of the requests at or above the
job's p99 were in a size's first batch or queued behind it (runs made before `request_parts` was recorded, such as
the H100 set, give the second without device times). A first batch of a size the job had not primed is slow (cuDNN's
autotuning of its shapes, kernels loaded on first use): `worker.serve.prime_batches` now serves every size before
`ready`; runs made before it primed only 1 and `max_batch` requests.

    python3 benchmarks/inference/first_batches.py benchmarks/inference/results/h200/r50b/runs.tgz > first-batches.md
"""

from __future__ import annotations

import math
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

from colloc_kit.analysis.latency import percentile_ci
from colloc_kit.store.rundir import read_events

__all__ = ["first_batches", "main", "unprimed_tail"]


def first_batches(events: list[dict]) -> list[dict]:
    """One row per batch size of the job's measured window (`interval` events, warm-up left out; a batch is the
    requests answered at one time): batches, the first one's device time and the median (ms, NaN where the run did
    not record `request_parts`), and of the requests at or above the window's p99 those in the first batch or behind
    it (arrived before it was answered, answered at or after it).

    >>> stream = [{"type": "interval", "requests": [[0.0, 0.99], [0.5, 0.995], [2.0, 2.005], [2.0, 2.005]],
    ...            "request_parts": [[0.0, 990.0], [0.99, 5.0], [2.0, 5.0], [2.0, 5.0]]}]
    >>> [(r["requests"], r["batches"], r["first_ms"], r["p99_in_or_behind"]) for r in first_batches(stream)]
    [(1, 2, 990.0, 1), (2, 1, 5.0, 0)]
    >>> unprimed_tail(stream, primed=[1])       # the p99's request waited for no first batch of an unprimed size
    (0, 1)
    """
    by_size, tail = _batches(events)
    return [{"requests": size, "batches": len(rows), "first_ms": rows[0][1],
             "median_ms": statistics.median(device for _, device in rows),
             "p99_in_or_behind": sum(a < rows[0][0] <= d for a, d in tail), "p99_requests": len(tail)}
            for size, rows in sorted(by_size.items())]


def unprimed_tail(events: list[dict], primed: list[int]) -> tuple[int, int]:
    """(the requests at or above the p99 that were in or behind the first batch of a size not in `primed`, all the
    requests at or above the p99)."""
    by_size, tail = _batches(events)
    firsts = [rows[0][0] for size, rows in by_size.items() if size not in primed]
    return sum(any(a < done <= d for done in firsts) for a, d in tail), len(tail)


def _batches(events: list[dict]) -> tuple[dict[int, list[tuple[float, float]]], list[tuple[float, float]]]:
    """Per batch size its batches in order ([answered at, device ms]), and the requests ([arrival, answered]) at or
    above the window's p99 (nearest rank, the kit's rule)."""
    batches: dict[float, list] = {}  # answered at -> [device ms, arrivals]
    for event in events:
        if event.get("type") != "interval" or event.get("warmup"):
            continue
        parts = event.get("request_parts") or [[None, math.nan]] * len(event.get("requests") or ())
        for (arrival, done), (_, device_ms) in zip(event.get("requests") or (), parts):
            batches.setdefault(done, [device_ms, []])[1].append(arrival)
    requests = [(arrival, done) for done, (_, arrivals) in batches.items() for arrival in arrivals]
    if not requests:
        return {}, []
    p99 = percentile_ci([done - arrival for arrival, done in requests], 0.99)[0]
    by_size: dict[int, list] = {}
    for done in sorted(batches):
        by_size.setdefault(len(batches[done][1]), []).append((done, batches[done][0]))
    return by_size, [(a, d) for a, d in requests if d - a >= p99]


def _ms(value: float) -> str:
    return "not recorded" if math.isnan(value) else f"{value:.1f}"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        source = Path(argv[0])
        if source.suffix == ".tgz":
            with tarfile.open(source) as packed:
                packed.extractall(folder, filter="data")
            source = Path(folder)
        streams = {f"{f.parents[1].parent.name}/{f.parents[1].name}": read_events(f)
                   for f in sorted(source.glob("**/jobs/j0-*.events.jsonl"))}
        print("Per run: the requests at or above its p99 in or behind the first batch of a size the server had not "
              "primed (the `ready` event's `primed_batches`; before them 1 and `max_batch` requests)\n")
        print("| run | p99 requests in or behind an unprimed size's first batch |\n|---|---|")
        for run, stream in streams.items():
            ready = next((e for e in stream if e.get("type") == "ready"), {})
            primed = ready.get("primed_batches") or [1, ready.get("max_batch") or 1]
            waited, tail = unprimed_tail(stream, primed)
            if tail:
                print(f"| {run} | {waited} of {tail} |")
        print("\nPer run and batch size\n\n| run | batch of n requests | batches | first batch's device ms | median ms "
              "| p99 requests in or behind it |\n|---|---|---|---|---|---|")
        for run, stream in streams.items():
            for row in first_batches(stream):
                print(f"| {run} | {row['requests']} | {row['batches']} | {_ms(row['first_ms'])} | "
                      f"{_ms(row['median_ms'])} | {row['p99_in_or_behind']} of {row['p99_requests']} |")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
