"""Why a served p99 is what it is (issue 51): per run of an inference job, each batch size's (requests a batch)
first batch inside the window against that size's median device time, and how many of the requests at or above the
job's p99 were served in a size's first batch. A first batch of a size the job had not primed is slow (cuDNN's
autotuning of its shapes, kernels loaded on first use): `worker.serve.prime_batches` now serves every size before
`ready`; runs made before it primed only 1 and `max_batch` requests.

    python3 benchmarks/inference/first_batches.py benchmarks/inference/results/h200/r50b/runs.tgz > first-batches.md
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = ["first_batches", "main"]


def first_batches(events: list[dict]) -> list[dict]:
    """One row per batch size of the job's measured window (`interval` events, warm-up left out): batches, the first
    one's device time, the median device time, and the requests at or above the window's p99 served in a first batch.

    >>> stream = [{"type": "interval", "requests": [[0.0, 1.0], [0.1, 0.105], [0.2, 0.205], [0.2, 0.207]],
    ...            "request_parts": [[0.0, 990.0], [0.1, 4.0], [0.2, 6.0], [0.2, 6.0]]}]
    >>> [(r["requests"], r["batches"], r["first_ms"], r["p99_requests_in_first"]) for r in first_batches(stream)]
    [(1, 2, 990.0, 1), (2, 1, 6.0, 0)]
    """
    batches: dict[float, list] = {}  # batch start -> [device ms, its requests' latencies]
    for event in events:
        if event.get("type") != "interval" or event.get("warmup"):
            continue
        for (arrival, done), (start, device_ms) in zip(event.get("requests") or (), event.get("request_parts") or ()):
            batches.setdefault(start, [device_ms, []])[1].append(done - arrival)
    latencies = sorted(x for _, served in batches.values() for x in served)
    if not latencies:
        return []
    p99 = latencies[math.ceil(0.99 * len(latencies)) - 1]  # nearest rank, the kit's rule
    by_size: dict[int, list] = {}
    for start in sorted(batches):
        device_ms, served = batches[start]
        by_size.setdefault(len(served), []).append((device_ms, served))
    return [{"requests": size, "batches": len(rows), "first_ms": rows[0][0],
             "median_ms": statistics.median(device for device, _ in rows),
             "p99_requests_in_first": sum(x >= p99 for x in rows[0][1]),
             "p99_requests": sum(x >= p99 for x in latencies)} for size, rows in sorted(by_size.items())]


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
        print("| run | batch of n requests | batches | first batch's device ms | median ms | p99 requests in it |")
        print("|---|---|---|---|---|---|")
        for events_file in sorted(source.glob("**/jobs/j0-*.events.jsonl")):
            stream = [json.loads(line) for line in events_file.read_text().splitlines()]
            for row in first_batches(stream):
                run = events_file.parents[1]
                print(f"| {run.parent.name}/{run.name} | {row['requests']} | {row['batches']} | {row['first_ms']:.1f} "
                      f"| {row['median_ms']:.1f} | {row['p99_requests_in_first']} of {row['p99_requests']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
