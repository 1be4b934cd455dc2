"""How long an experiment's cells take over its lanes (GPUs), from the lanes measured in its folder: each earlier
cell's lane time (from its start to the next cell's start on its GPU: set-up, window, tear-down and the gap between
cells; a lane's last cell of a command: its own wall time), as a mean per mode, copies and kind of window (a warm
launch's later windows, set up by its first, apart), the cells handed out in the dispatcher's order
(`executors.dispatcher.dispatch_order`) to lanes that each take the next cell as they free up. A mean, not a median: a
total is the sum of the cells' times, the slow ones (a launch's first window, a long autotune) included.

    >>> from colloc_kit.spec import ModeSpec
    >>> todo = [Cell(ModeSpec("naive"), copies, 0, f"c{copies}") for copies in (1, 3, 3)]
    >>> wall_s(todo, lanes=2, per_cell_s={("naive", 1, False): 10.0, ("naive", 3, False): 20.0})
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
from colloc_kit.pipeline.executors.dispatcher import dispatch_order
from colloc_kit.spec import ExperimentSpec, JobSpec  # noqa: F401 - JobSpec: the doctests
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["SAME_COMMAND_GAP_S", "LaneKey", "cell_seconds", "lane_spans", "lane_times", "lanes_of", "per_cell_text",
           "plan_line", "plan_seconds", "wall_s"]


LaneKey = tuple[str, int, bool]  # (mode label, copies, a warm launch's later window)
SAME_COMMAND_GAP_S = 30.0  # a lane's next cell starting longer after a cell's end: started by a later command


def lane_times(runs: pd.DataFrame) -> dict[LaneKey, float]:
    """{(mode label, copies, later window): mean lane seconds per cell} of the complete runs of `runs`
    (`load(...).runs`), each cell's lane time measured on its GPU as `lane_spans` says (here 10, 8 and 9.5 s: the
    second's lane was next started 100 s on, by a later command, so it counts its own wall; 12 s, a later window).

    >>> runs = pd.DataFrame({"mode_label": ["naive"] * 4, "copies": [1] * 4, "gpu": [0, 0, 1, 0],
    ...                      "status": ["complete"] * 4, "started_at": [0.0, 10.0, 0.0, 118.0],
    ...                      "ended_at": [9.0, 18.0, 9.5, 130.0], "warm_window": [None, None, None, 1]})
    >>> lane_times(runs)
    {('naive', 1, False): 9.166666666666666, ('naive', 1, True): 12.0}
    """
    spans = lane_spans(runs)
    means = spans.groupby(["mode_label", "copies", "later"])["lane_s"].mean()
    return {(str(mode), int(copies), bool(later)): float(seconds) for (mode, copies, later), seconds in means.items()}


def lane_spans(runs: pd.DataFrame) -> pd.DataFrame:
    """Each complete run of `runs` with its lane seconds (`lane_s`: from its start to the next start on its GPU; its
    own wall time where the next cell started more than `SAME_COMMAND_GAP_S` after its end, a later command's) and
    whether it was a warm launch's later window (`later`: `warm_window` 1 or more)."""
    done = runs[runs["status"] == "complete"].dropna(subset=["started_at", "ended_at"]).sort_values("started_at")
    later = done["warm_window"].fillna(0) >= 1 if "warm_window" in done else pd.Series(False, done.index)
    lane_s = []
    for _, lane in done.groupby(done["gpu"].fillna(-1)):
        next_start, own_s = lane["started_at"].shift(-1), lane["ended_at"] - lane["started_at"]
        lane_s.append((next_start - lane["started_at"]).where(next_start - lane["ended_at"] <= SAME_COMMAND_GAP_S,
                                                              own_s))
    return done.assign(copies=done["copies"].astype(int), later=later,
                       lane_s=pd.concat(lane_s) if lane_s else pd.Series(dtype=float))


def wall_s(cells: list[Cell], lanes: int, per_cell_s: dict[LaneKey, float], warm: bool = False) -> float | None:
    """The wall time of `cells` over `lanes` lanes that take the next cell as they free up; with `warm` (warm
    repeats), a cell after the first of its series is a later window of its launch, as is a twin whose feed is swapped
    on the launch of its cell (`Cell.feed_from`) once that ran. A cell whose kind of window was
    not measured takes its mode and copies' other kind; one of a mode and copies not measured, the mean of those
    measured. None where nothing was measured."""
    if not per_cell_s:
        return None
    free_at, seen = [0.0] * max(1, lanes), set()
    for cell in dispatch_order(cells):
        key = (cell.mode.label, cell.copies, warm and (cell.series in seen or cell.feed_from in seen))
        seen.add(cell.series)
        heapq.heappush(free_at, heapq.heappop(free_at) + cell_seconds(key, per_cell_s))
    return max(free_at)


def cell_seconds(key: LaneKey, per_cell_s: dict[LaneKey, float]) -> float:
    """The lane seconds a cell of `key` takes by `per_cell_s` (`lane_times`): its own, else its mode and copies'
    other kind of window, else the mean of all.

    >>> cell_seconds(("mps", 2, True), {("mps", 2, False): 14.0, ("naive", 1, False): 8.0})
    14.0
    """
    mode, copies, later = key
    return per_cell_s.get(key, per_cell_s.get((mode, copies, not later), statistics.fmean(per_cell_s.values())))


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
    (`lane_times`): the planned cells, and those with every precision repeat a baseline or a cell may still need for its
    target (`precision.precision_repeats`); (None, None) where none were measured yet.

    >>> import tempfile
    >>> plan_seconds(ExperimentSpec(jobs=[JobSpec(model="smallcnn")]), tempfile.mkdtemp())
    (None, None)
    """
    todo, repeats, measured, _ = _measured(spec, out)
    lanes, warm = lanes_of(spec), spec.warm_repeats
    return wall_s(todo, lanes, measured, warm), wall_s(todo + repeats, lanes, measured, warm)


def plan_line(spec: ExperimentSpec, out: str | Path) -> str:
    """What `--plan` says of the time: the cells of `spec` not complete under out/<name>, over its lanes, from the
    lanes measured there (`lane_times`); or that none were measured yet.

    >>> import tempfile
    >>> plan_line(ExperimentSpec(jobs=[JobSpec(model="smallcnn")]), tempfile.mkdtemp())
    'time: no cells of these jobs measured in this folder yet; run some, and --plan estimates from their lanes'
    """
    todo, _, measured, runs = _measured(spec, out)
    lanes = lanes_of(spec)
    estimate = wall_s(todo, lanes, measured, spec.warm_repeats)
    if estimate is None or runs is None:
        return ("time: no cells of these jobs measured in this folder yet; run some, and --plan estimates from "
                "their lanes")
    return (f"time: about {estimate / 60:.1f} min for {len(todo)} cell(s) on {lanes} lane(s) (GPUs), from the lanes "
            f"of {int((runs['status'] == COMPLETE).sum())} earlier run(s) here (per cell: {per_cell_text(measured)})")


def per_cell_text(per_cell_s: dict[LaneKey, float]) -> str:
    """The lane seconds per cell as `--plan` says them, a warm launch's later windows beside the rest.

    >>> per_cell_text({("naive", 1, False): 12.4, ("naive", 1, True): 7.2, ("mps", 2, True): 8.0})
    'mps x2 8 s a later window, naive x1 12 s (7 s a later window)'
    """
    said: dict[tuple[str, int], list[str]] = {}
    for (mode, copies, later), seconds in sorted(per_cell_s.items()):
        said.setdefault((mode, copies), []).append(f"{seconds:.0f} s" + (" a later window" if later else ""))
    return ", ".join(f"{mode} x{copies} {parts[0]}" + (f" ({parts[1]})" if len(parts) > 1 else "")
                     for (mode, copies), parts in said.items())


def _measured(spec: ExperimentSpec, out: str | Path) -> tuple[list[Cell], list[Cell], dict[LaneKey, float],
                                                              pd.DataFrame | None]:
    """The planned cells not complete under out/<name>, the precision repeats past `repeats` not run, the lane seconds
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
