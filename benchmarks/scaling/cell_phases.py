"""Where a cell's wall time goes, from an experiment folder's runs: per number of jobs, the median wall time and when
the last job was ready (its build and its priming: cuDNN autotuning in the first step), started, and measured, in
seconds from the cell's start; with the window each job measured; cold runs apart from warm repeats' first and later
windows (`ExperimentSpec.warm_repeats`: a later window's jobs were built and primed by its launch's first), and a
window whose feed was swapped (`ExperimentSpec.feed_swaps`: its jobs fed anew, warmed up again) apart from both.
`lane_phases`: where each lane's (GPU's) time went over a pass of several experiments: its start, its cells' phases,
the gaps between them, its idle end.

    python3 benchmarks/scaling/cell_phases.py RUNS/seed-33            # a table on stdout, and how many cells a minute
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

__all__ = ["LANE_PHASES", "cell_phases", "lane_phases", "main"]

# where a lane's time goes, in order; they add up to the pass's wall time
LANE_PHASES = ["start_s", "set_up_s", "build_s", "primed_s", "to_window_s", "window_s", "tear_down_s", "gap_s",
               "idle_end_s"]


def cell_phases(experiment: Path) -> list[dict]:
    """One row per complete run: its jobs, wall time, and the phases above (the slowest job's)."""
    rows = []
    for manifest_file in sorted(experiment.glob("*/manifest.json")):
        manifest = json.loads(manifest_file.read_text())
        if manifest["status"] != "complete":
            continue
        t0, last = manifest["started_at"], defaultdict(list)
        for events in (manifest_file.parent / "jobs").glob("*.events.jsonl"):
            for line in events.read_text().splitlines():
                event = json.loads(line)
                last[event["type"]].append(event)
        warm = manifest.get("warm") or {}
        window = warm.get("window")  # a warm repeat's window of its launch (0: its first)
        rows.append({"jobs": len(last["ready"]), "gpu": manifest.get("gpu"), "wall_s": manifest["ended_at"] - t0,
                     "launch": "cold" if window is None else "warm, first" if window == 0 else
                     "warm, swapped" if warm.get("feed_from") else "warm, later",
                     "ready_s": max(e["t"] for e in last["ready"]) - t0,
                     "build_s": max(e["build_s"] for e in last["ready"]),
                     "primed_s": max(e["primed_s"] for e in last["ready"]),
                     "measured_s": max(e["t"] for e in last["measured"]) - t0,
                     "window_s": min(e["steady_s"] for e in last["measured"]),
                     "started_at": t0, "ended_at": manifest["ended_at"], "run": manifest_file.parent.name})
    return rows


def lane_phases(experiments: list[Path], t0: float, t1: float) -> list[dict]:
    """One row per GPU of the complete runs of `experiments`, a pass from `t0` to `t1` (the kit's clock): seconds
    until its first cell started (`start_s`: lane process and zygote), within its cells until the last job was ready
    beyond its build and first step (`set_up_s`: mode, monitor, fork), the slowest job's model build (`build_s`) and
    first step (`primed_s`: cuDNN autotuning), barrier and warm-up (`to_window_s`), the window, stop and tear-down,
    the gaps between cells (`gap_s`: read-back, dispatch), and its end idle while others ran (`idle_end_s`)."""
    rows = [row for experiment in experiments for row in cell_phases(experiment)]
    lanes = []
    for gpu in sorted({r["gpu"] for r in rows}, key=str):
        mine = sorted((r for r in rows if r["gpu"] == gpu), key=lambda r: r["started_at"])
        lane = {"gpu": gpu, "cells": len(mine), "start_s": mine[0]["started_at"] - t0,
                "gap_s": sum(b["started_at"] - a["ended_at"] for a, b in zip(mine, mine[1:])),
                "idle_end_s": t1 - mine[-1]["ended_at"]}
        for r in mine:
            phases = {"set_up_s": r["ready_s"] - r["build_s"] - r["primed_s"], "build_s": r["build_s"],
                      "primed_s": r["primed_s"], "to_window_s": r["measured_s"] - r["ready_s"] - r["window_s"],
                      "window_s": r["window_s"], "tear_down_s": r["wall_s"] - r["measured_s"]}
            for key, value in phases.items():
                lane[key] = lane.get(key, 0.0) + value
        lane["overhead_per_cell_s"] = (t1 - t0 - lane["idle_end_s"] - lane["window_s"]) / len(mine)
        lanes.append(lane)
    return lanes


def main(argv: list[str]) -> int:
    rows = cell_phases(Path(argv[0]))
    if not rows:
        print(f"no complete runs under {argv[0]}", file=sys.stderr)
        return 2
    columns = ["wall_s", "ready_s", "build_s", "primed_s", "measured_s", "window_s"]
    print("| jobs | launch | cells | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 3))
    for jobs, launch in sorted({(r["jobs"], r["launch"]) for r in rows}):
        mine = [r for r in rows if r["jobs"] == jobs and r["launch"] == launch]
        medians = [f"{statistics.median(r[c] for r in mine):.1f}" for c in columns]
        print(f"| {jobs} | {launch} | {len(mine)} | " + " | ".join(medians) + " |")
    span = max(r["ended_at"] for r in rows) - min(r["started_at"] for r in rows)
    print(f"\n{len(rows)} complete cells in {span:,.0f} s from the first start to the last end "
          f"({span / len(rows):.1f} s a cell)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
