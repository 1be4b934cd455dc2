"""Where a multi-GPU run's lanes stood idle: each lane's (GPU's) idle gaps between its complete runs, the long ones
listed with the run that ended each, and how much lane time the gaps and the lanes' busy time came to per call span.
A gap that every lane shows, ending at the same moment, is a barrier (the kit waited for the slowest lane).

    python3 benchmarks/scaling/lane_gaps.py RUNS/seed-33 --calls 1795874700-1795875050,1795875097-1795875588
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from cell_phases import cell_phases  # a sibling: on sys.path when this file runs as a script


def lane_runs(experiment: Path) -> dict[int, list[tuple[float, float, str]]]:
    """Each GPU's complete runs as (start, end, run name), in start order."""
    lanes: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for row in cell_phases(experiment):
        lanes[row["gpu"]].append((row["started_at"], row["ended_at"], row["run"]))
    return {gpu: sorted(runs) for gpu, runs in lanes.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--calls", required=True, help="each call's run span, START-END in Unix seconds, commas")
    parser.add_argument("--long-s", type=float, default=6.0, help="gaps listed from this length")
    args = parser.parse_args(argv)
    calls = [tuple(float(t) for t in span.split("-")) for span in args.calls.split(",")]
    lanes, t0 = lane_runs(args.experiment), calls[0][0]
    print("| lane | gap from s | to s | gap s | next run |\n|---|---|---|---|---|")
    for gpu, runs in sorted(lanes.items()):
        for (_, end, _), (start, _, name) in zip(runs, runs[1:]):
            if start - end >= args.long_s:
                print(f"| {gpu} | {end - t0:.0f} | {start - t0:.0f} | {start - end:.1f} | {name} |")
    print("\n| call | span s | lane | runs | busy s | busy share | gaps s |\n|---|---|---|---|---|---|---|")
    for number, (begin, end) in enumerate(calls, 1):
        for gpu, runs in sorted(lanes.items()):
            inside = [(a, b) for a, b, _ in runs if begin <= a <= end]
            busy = sum(b - a for a, b in inside)
            gaps = sum(a2 - b1 for (_, b1), (a2, _) in zip(inside, inside[1:]))
            print(f"| {number} | {end - begin:.0f} | {gpu} | {len(inside)} | {busy:.0f} | {busy / (end - begin):.2f} "
                  f"| {gaps:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
