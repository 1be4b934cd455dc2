"""Which of this host's cores slow each other down? On a VM two vCPUs can be one physical core's two hyperthreads, which
the guest's `lscpu` cannot show; a loader worker placed beside another then decodes slower.

    python benchmarks/peer/vcpu_pairs.py --out /tmp/vcpu-pairs

A decode-like load (zlib's inflate, the codec of PNG files) is timed on each core alone, `--rounds` times, one core
after another (so a core's time is its speed over the second or so its rounds take); then on every pair of cores at
once, `--rounds` times. Writes OUT/pairs.csv (core_a, core_b, slowdown: the pair's time over the two cores' times alone,
the median over the rounds) and prints the pairs slower than `--flag`.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import statistics
import time
import zlib
from multiprocessing.connection import Connection
from pathlib import Path

import pandas as pd

PAYLOAD = zlib.compress(bytes(i * 7 % 251 if i % 5 else i % 13 for i in range(1 << 20)), 6)


def inflate(times: int) -> float:
    """Seconds to inflate the payload `times` times on the calling core."""
    t0 = time.perf_counter()
    for _ in range(times):
        zlib.decompress(PAYLOAD)
    return time.perf_counter() - t0


def serve(core: int, conn: Connection) -> None:
    """Pinned to `core`: on each count received, inflate that many times and send the seconds back; stop on 0."""
    os.sched_setaffinity(0, {core})
    while times := conn.recv():
        conn.send(inflate(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.15, help="the load's length on one core alone")
    parser.add_argument("--flag", type=float, default=1.15, help="print pairs slower than this")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        parser.error(f"this process may run on {len(cores)} core; compare cores on a host (or affinity) with 2 or more")
    times = max(1, round(args.seconds / (inflate(20) / 20)))
    servers, conns = [], {}
    for core in cores:
        parent, child = mp.Pipe()
        servers.append(mp.get_context("fork").Process(target=serve, args=(core, child), daemon=True))
        servers[-1].start()
        conns[core] = parent
    try:
        def timed(group: tuple[int, ...]) -> list[float]:
            for core in group:
                conns[core].send(times)
            return [conns[core].recv() for core in group]

        alone = {core: statistics.median(timed((core,))[0] for _ in range(args.rounds)) for core in cores}
        rows = []
        for a, b in itertools.combinations(cores, 2):
            ratios = [statistics.mean(t / alone[c] for t, c in zip(timed((a, b)), (a, b), strict=True))
                      for _ in range(args.rounds)]
            rows.append({"core_a": a, "core_b": b, "slowdown": statistics.median(ratios)})
    finally:
        for conn in conns.values():
            conn.send(0)
        for server in servers:
            server.join(timeout=10)
    pairs = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    pairs.to_csv(args.out / "pairs.csv", index=False)
    pd.Series(alone, name="alone_s").rename_axis("core").to_csv(args.out / "alone.csv")
    print(f"{len(cores)} cores, {times} inflates per load, alone {min(alone.values()):.3f}-{max(alone.values()):.3f} s"
          f" ({100 * (max(alone.values()) / min(alone.values()) - 1):.0f} % apart);"
          f" pair slowdown median {pairs['slowdown'].median():.2f}, max {pairs['slowdown'].max():.2f}")
    slow = pairs[pairs["slowdown"] > args.flag]
    print(slow.to_string(index=False, float_format=lambda v: f"{v:.2f}") if len(slow) else
          f"no pair slower than {args.flag}")


if __name__ == "__main__":
    main()
