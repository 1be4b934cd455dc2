"""How long an experiment's cells take over its lanes (GPUs), from the lanes measured in its folder: each earlier
cell's lane time (from its start to the next cell's start on its GPU: set-up, window, tear-down and the gap between
cells; a lane's last cell: its own wall time), as a median per mode and copies, the cells handed out in the
dispatcher's order (`executors.gpus.dispatch_order`) to lanes that each take the next cell as they free up.

    >>> from colloc_kit.spec import ModeSpec
    >>> todo = [Cell(ModeSpec("naive"), copies, 0, f"c{copies}") for copies in (1, 3, 3)]
    >>> wall_s(todo, lanes=2, per_cell_s={("naive", 1): 10.0, ("naive", 3): 20.0})
    30.0
"""

from __future__ import annotations

import heapq
import statistics
from pathlib import Path

import pandas as pd

from colloc_kit import machine
from colloc_kit.analysis.results import load
from colloc_kit.pipeline.cells import Cell, cells, jobs_fingerprint
from colloc_kit.pipeline.executors.gpus import dispatch_order
from colloc_kit.spec import ExperimentSpec, JobSpec  # noqa: F401 - JobSpec: the doctests
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["lane_times", "lanes_of", "plan_line", "plan_seconds", "wall_s"]


def lane_times(runs: pd.DataFrame) -> dict[tuple[str, int], float]:
    """{(mode label, copies): median lane seconds per cell} of the complete runs of `runs` (`load(...).runs`), each
    cell's lane time measured on its GPU as the module says (here 12, 9 and 9.5 s).

    >>> runs = pd.DataFrame({"mode_label": ["naive"] * 3, "copies": [1, 1, 1], "gpu": [0, 0, 1],
    ...                      "status": ["complete"] * 3, "started_at": [0.0, 12.0, 0.0], "ended_at": [10.0, 21.0, 9.5]})
    >>> lane_times(runs)
    {('naive', 1): 9.5}
    """
    done = runs[runs["status"] == "complete"].dropna(subset=["started_at", "ended_at"])
    spans: dict[tuple[str, int], list[float]] = {}
    for _, lane in done.sort_values("started_at").groupby(done["gpu"].fillna(-1)):
        next_start = lane["started_at"].shift(-1)
        lane_s = (next_start - lane["started_at"]).fillna(lane["ended_at"] - lane["started_at"])
        for key, seconds in zip(zip(lane["mode_label"], lane["copies"].astype(int)), lane_s):
            spans.setdefault(key, []).append(float(seconds))
    return {key: statistics.median(values) for key, values in spans.items()}


def wall_s(cells: list[Cell], lanes: int, per_cell_s: dict[tuple[str, int], float]) -> float | None:
    """The wall time of `cells` over `lanes` lanes that take the next cell as they free up; a cell of a mode and
    copies not measured takes the median of those measured. None where nothing was measured."""
    if not per_cell_s:
        return None
    fallback = statistics.median(per_cell_s.values())
    free_at = [0.0] * max(1, lanes)
    for cell in dispatch_order(cells):
        heapq.heappush(free_at, heapq.heappop(free_at) + per_cell_s.get((cell.mode.label, cell.copies), fallback))
    return max(free_at)


def lanes_of(spec: ExperimentSpec) -> int:
    """The lanes `spec`'s cells run on: its `gpus` (all: this machine's, at least one), else one.

    >>> lanes_of(ExperimentSpec(jobs=[JobSpec(model="smallcnn")], gpus=[0, 1]))
    2
    """
    if spec.gpus is None:
        return 1
    return max(1, len(machine.gpu_list()[0])) if spec.gpus == "all" else len(spec.gpus)


def plan_seconds(spec: ExperimentSpec, out: str | Path) -> tuple[float | None, float | None]:
    """The wall seconds of `spec`'s cells not complete under out/<name>, over its lanes, from the lanes measured there
    (`lane_times`): the planned cells, and those with every lone repeat a baseline may still need for its precision
    target (`precision.more_repeats`); (None, None) where none were measured yet.

    >>> import tempfile
    >>> plan_seconds(ExperimentSpec(jobs=[JobSpec(model="smallcnn")]), tempfile.mkdtemp())
    (None, None)
    """
    todo, repeats, measured, _ = _measured(spec, out)
    return wall_s(todo, lanes_of(spec), measured), wall_s(todo + repeats, lanes_of(spec), measured)


def plan_line(spec: ExperimentSpec, out: str | Path) -> str:
    """What `--plan` says of the time: the cells of `spec` not complete under out/<name>, over its lanes, from the
    lanes measured there (`lane_times`); or that none were measured yet.

    >>> import tempfile
    >>> plan_line(ExperimentSpec(jobs=[JobSpec(model="smallcnn")]), tempfile.mkdtemp())
    'time: no cells of these jobs measured in this folder yet; run some, and --plan estimates from their lanes'
    """
    todo, _, measured, runs = _measured(spec, out)
    lanes = lanes_of(spec)
    estimate = wall_s(todo, lanes, measured)
    if estimate is None or runs is None:
        return ("time: no cells of these jobs measured in this folder yet; run some, and --plan estimates from "
                "their lanes")
    per_cell = ", ".join(f"{mode} x{copies} {seconds:.0f} s" for (mode, copies), seconds in sorted(measured.items()))
    return (f"time: about {estimate / 60:.1f} min for {len(todo)} cell(s) on {lanes} lane(s) (GPUs), from the lanes "
            f"of {int((runs['status'] == COMPLETE).sum())} earlier run(s) here (per cell: {per_cell})")


def _measured(spec: ExperimentSpec, out: str | Path) -> tuple[list[Cell], list[Cell], dict[tuple[str, int], float],
                                                              pd.DataFrame | None]:
    """The planned cells not complete under out/<name>, the lone repeats past `repeats` not run, the lane seconds
    per cell measured there (`lane_times`) and the runs of these jobs it measured them from (None: no folder)."""
    folder = ExperimentFolder.of(out, spec.name)
    states = folder.cell_states()
    missing = [c for c in cells(spec) if not (c.cell_id in states and states[c.cell_id].status == COMPLETE)]
    runs = load(folder.path).runs if folder.path.is_dir() else None
    if runs is not None and len(runs):  # only runs of these very jobs: a cell id ends with their fingerprint
        runs = runs[runs["cell_id"].astype(str).str.endswith(f"-{jobs_fingerprint(spec)}")]
    measured = lane_times(runs) if runs is not None and len(runs) else {}
    return ([c for c in missing if c.repeat < spec.repeats], [c for c in missing if c.repeat >= spec.repeats],
            measured, runs)
