"""The passes of a scaling run (`benchmarks/scaling/scaling.py run`) under its --out folder: a pass's record, written
when the pass ends, lets a later command (another device call, on the same card) read the pass instead of running it
again; a pass folder without its record was cut short and is refused. `Passes` holds the passes measured so far, their
estimates for the next and their tables (walls, figures, lanes, cells).

    >>> overlap(100.0, 5.0, 108.0, 4.0), overlap(100.0, 1.0, 108.0, 4.0)
    (True, False)
    >>> recorded_passes(Path("/nowhere"), {"seconds": 3.0})
    {}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import pandas as pd
from cell_phases import LANE_PHASES, cell_phases, lane_phases

import colloc_kit
from colloc_kit.spec import ExperimentSpec
from colloc_kit.stats import ci95

__all__ = ["ASSUMED_OVERHEAD_S", "PASS_RECORD", "Passes", "figures", "overlap", "recorded_passes", "refuse"]

PASS_RECORD = "pass.json"  # written in a pass's folder when the pass ends: a folder without one was cut short
ASSUMED_OVERHEAD_S = 10.0  # a cell's seconds beyond its window before a pass measured it (more than the 4-H200 run's)


class Passes:
    """The passes under an --out folder, those recorded by earlier commands and this one's, and their tables."""

    def __init__(self, out: Path, specs: list[ExperimentSpec]):
        self.out, self.names = out, [spec.name for spec in specs]
        self.walls: list[dict] = []
        self.lanes: list[dict] = []
        self.cells: list[dict] = []
        self.results: dict[int, colloc_kit.Results] = {}

    def add(self, wall: dict) -> None:
        """A pass that ended (its record): its results, lanes and cells, read from its folder."""
        experiments = [self.out / f"gpus-{wall['gpus']}" / name for name in self.names]
        self.walls.append(wall)
        self.results[wall["gpus"]] = colloc_kit.load(self.out / f"gpus-{wall['gpus']}")
        self.lanes += [{"gpus": wall["gpus"], **lane} for lane in lane_phases(experiments, wall["t0"], wall["t1"])]
        self.cells += _cells(wall["gpus"], experiments)

    def write_cells(self, gpus: int, experiments: list[Path]) -> None:
        """cells.csv: the passes' cells and those of `experiments`, done so far in the pass on `gpus` GPUs."""
        pd.DataFrame(self.cells + _cells(gpus, experiments)).to_csv(self.out / "cells.csv", index=False)

    def estimate(self, cells: int, gpus: int, seconds: float) -> tuple[float, str]:
        """A pass's wall time, cells x (window + a cell's seconds beyond it) / GPUs, and how it was reached: the
        seconds beyond the window are the largest median over a pass's lanes of the passes so far, else assumed."""
        overhead, source = ASSUMED_OVERHEAD_S, "assumed"
        if self.lanes:
            per_pass = pd.DataFrame(self.lanes).groupby("gpus")["overhead_per_cell_s"].median()
            overhead, source = float(per_pass.max()), "measured"
        return -(-cells // gpus) * (seconds + overhead), (f"{cells} cells x ({seconds:g} s window + {overhead:.1f} s "
                                                          f"{source} beyond it) / {gpus} GPU(s)")

    def tables(self) -> dict[str, pd.DataFrame]:
        """walls (speed-up over the fewest GPUs' pass), figures, lanes and cells of every pass, by GPUs."""
        walls = pd.DataFrame(self.walls).sort_values("gpus", ignore_index=True)
        walls["speed_up"] = walls["wall_s"].iloc[0] / walls["wall_s"]
        return {"walls": walls.drop(columns=["t0", "t1", "settings"]),
                "figures": figures(dict(sorted(self.results.items()))),
                "lanes": pd.DataFrame(self.lanes)[["gpus", "gpu", "cells", *LANE_PHASES, "overhead_per_cell_s"]],
                "cells": pd.DataFrame(self.cells)}


def _cells(gpus: int, experiments: list[Path]) -> list[dict]:
    return [{"gpus": gpus, "experiment": e.name, **row} for e in experiments for row in cell_phases(e)]


def figures(results: dict[int, colloc_kit.Results]) -> pd.DataFrame:
    """Per (experiment, mode, copies): each pass's mean aggregate and per-job images/s over the repeats, each with
    its 95 % CI (Student's t over the repeats), and whether it agrees with the first pass's (the CIs overlap)."""
    rows = []
    for gpus, found in results.items():
        job_means = found.jobs.groupby("run_id")["images_per_s"].mean()
        runs = found.runs.assign(job_mean=found.runs["run_id"].map(job_means))
        for (experiment, mode, copies), cell in runs.groupby(["experiment", "mode_label", "copies"]):
            (agg, agg_ci), (job, job_ci) = ci95(cell["aggregate_images_per_s"]), ci95(cell["job_mean"])
            rows.append({"experiment": experiment, "mode": mode, "copies": copies, "gpus": gpus,
                         "repeats": len(cell), "aggregate_images_per_s": agg, "aggregate_ci": agg_ci,
                         "job_images_per_s": job, "job_ci": job_ci})
    table = pd.DataFrame(rows)
    first = table[table["gpus"] == min(results)].set_index(["experiment", "mode", "copies"])
    agree = []
    for _, row in table.iterrows():
        base = first.loc[(row["experiment"], row["mode"], row["copies"])]
        agree.append(overlap(row["aggregate_images_per_s"], row["aggregate_ci"], base["aggregate_images_per_s"],
                             base["aggregate_ci"]))
    return table.assign(agrees_with_first=agree)


def overlap(a: float, a_ci: float, b: float, b_ci: float) -> bool:
    """Whether a +- a_ci and b +- b_ci overlap (a missing CI counts as none: the values must then be equal)."""
    a_ci, b_ci = (0.0 if pd.isna(x) else x for x in (a_ci, b_ci))
    return bool(abs(a - b) <= a_ci + b_ci)


def recorded_passes(out: Path, settings: dict) -> dict[int, dict]:
    """The records of the passes under `out` (`gpus-N/pass.json`) by GPUs; a pass folder without its record (cut
    short) or recorded with other settings or another card is refused, exit 2, before anything starts."""
    found = {}
    for folder in sorted(out.glob("gpus-*")):
        record = folder / PASS_RECORD
        if not record.exists():
            refuse(f"{folder} has no {PASS_RECORD}: its pass was cut short (the kit would reuse its cells, measuring "
                   f"nothing); remove that folder to run the pass again, or give a fresh --out")
        wall = json.loads(record.read_text())
        differ = {key: wall["settings"].get(key) for key in settings if wall["settings"].get(key) != settings[key]}
        if differ:
            refuse(f"{folder} was measured with {differ} (its {PASS_RECORD}), this command with "
                   f"{ {key: settings[key] for key in differ} }; give the same settings on the same card, or a "
                   f"fresh --out")
        found[wall["gpus"]] = wall
    return found


def refuse(message: str) -> NoReturn:
    """Bad input: `message` on stderr, exit 2."""
    print(f"scaling: {message}", file=sys.stderr)
    sys.exit(2)
