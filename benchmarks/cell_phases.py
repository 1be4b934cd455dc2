"""Where a cell's wall time goes, from an experiment folder's runs: per number of jobs, the median wall time and when
the last job was ready (its build and its priming: cuDNN autotuning in the first step), started, and measured, in
seconds from the cell's start; with the window each job measured.

    python3 benchmarks/cell_phases.py RUNS/seed-33            # a table on stdout, and how many cells a minute
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

__all__ = ["cell_phases", "main"]


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
        rows.append({"jobs": len(last["ready"]), "wall_s": manifest["ended_at"] - t0,
                     "ready_s": max(e["t"] for e in last["ready"]) - t0,
                     "build_s": max(e["build_s"] for e in last["ready"]),
                     "primed_s": max(e["primed_s"] for e in last["ready"]),
                     "measured_s": max(e["t"] for e in last["measured"]) - t0,
                     "window_s": min(e["steady_s"] for e in last["measured"]),
                     "started_at": t0, "ended_at": manifest["ended_at"]})
    return rows


def main(argv: list[str]) -> int:
    rows = cell_phases(Path(argv[0]))
    if not rows:
        print(f"no complete runs under {argv[0]}", file=sys.stderr)
        return 2
    columns = ["wall_s", "ready_s", "build_s", "primed_s", "measured_s", "window_s"]
    print("| jobs | cells | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 2))
    for jobs in sorted({r["jobs"] for r in rows}):
        mine = [r for r in rows if r["jobs"] == jobs]
        medians = [f"{statistics.median(r[c] for r in mine):.1f}" for c in columns]
        print(f"| {jobs} | {len(mine)} | " + " | ".join(medians) + " |")
    span = max(r["ended_at"] for r in rows) - min(r["started_at"] for r in rows)
    print(f"\n{len(rows)} complete cells in {span:,.0f} s from the first start to the last end "
          f"({span / len(rows):.1f} s a cell)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
