"""How well `--plan` foretold a stretch of a run: for the cells completed between two snapshots of one experiment
folder (BEFORE and AFTER, e.g. the folder packed at the end of two device calls), the lane seconds the plan gives them
from BEFORE's lanes (`estimate.lane_times`, `estimate.cell_seconds`) against those measured for them in AFTER
(`estimate.lane_spans`), with and without a warm launch's later windows timed apart.

    python benchmarks/seed/lent/plan_replay.py BEFORE/seed-33 AFTER/seed-33
"""

from __future__ import annotations

import argparse

import colloc_kit
from colloc_kit.pipeline import estimate


def replay(before: str, after: str) -> str:
    """A line: how many cells were completed between the snapshots, their lane seconds measured and as planned."""
    earlier, later = colloc_kit.load(before).runs, colloc_kit.load(after).runs
    per_cell = estimate.lane_times(earlier)
    one_kind = estimate.lane_times(earlier.assign(warm_window=None))  # every window timed alike
    done_before = set(earlier.loc[earlier["status"] == "complete", "cell_id"])
    new = estimate.lane_spans(later)
    new = new[~new["cell_id"].isin(done_before)]
    keys = list(zip(new["mode_label"], new["copies"], new["later"]))
    planned = sum(estimate.cell_seconds(key, per_cell) for key in keys)
    alike = sum(estimate.cell_seconds((mode, copies, False), one_kind) for mode, copies, _ in keys)
    measured = new["lane_s"].sum()
    return (f"{len(new)} cells completed ({int(new['later'].sum())} of them a warm launch's later window): "
            f"{measured:,.0f} lane-s measured; planned {planned:,.0f} ({planned / measured:.2f} x), "
            f"{alike:,.0f} ({alike / measured:.2f} x) with every window timed alike")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    print(replay(args.before, args.after))
