"""Figures precise by design: a lone baseline's repeats past `repeats` (up to `baseline_max_repeats`) and a collocated
cell's (up to `cell_max_repeats`, where the spec gives a `cell_precision`), its *precision repeats*, are submitted with
the planned cells and queued right behind their series, so that with warm repeats they are further windows of the
launch its planned repeats kept (issue 50: a loader-bound job's windows of one launch spread as far as separate
launches do, so each is as good a sample, at no new launch). When its turn comes, a precision repeat runs only while
its series is known less precisely than its target (`still_short`: the 95 % CI half-width over the mean,
`stats.relative_ci95` over its complete runs' images/s, a mix's least precise workload's, `series_precision`; one run:
not known); a lane passes over it otherwise (`pipeline.lane`). Cells queued in Slurm decide alike, when their task
reaches them.

    >>> from colloc_kit.spec import ExperimentSpec, JobSpec
    >>> import tempfile
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=20)], copies=[1, 2],
    ...                       baselines=["configured"], baseline_precision={"configured": 0.1}, baseline_max_repeats=3,
    ...                       cell_precision=0.04, cell_max_repeats=4)
    >>> [c.label for c in precision_repeats(spec, Plan.of(spec, ExperimentFolder.of(tempfile.mkdtemp(), "x")))]
    ['naive-x2-r1', 'naive-x1-r1', 'naive-x2-r2', 'naive-x1-r2', 'naive-x2-r3']
"""

from __future__ import annotations

import math
from collections import defaultdict

from colloc_kit.analysis.lone import WORKLOAD
from colloc_kit.analysis.results import RunReading, read_run
from colloc_kit.pipeline.cells import EXCLUSIVE, Cell, Plan, cells, collocated, lone_mode, series_most
from colloc_kit.spec import ExperimentSpec
from colloc_kit.stats import relative_ci95
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["baseline_of", "most_repeats", "precision_repeat", "precision_repeats", "series_precision", "still_short",
           "target"]


def baseline_of(spec: ExperimentSpec, cell: Cell) -> str | None:
    """Which baseline a lone cell measures (configured, host-matched, gpu-only), or None for a cell that is none."""
    if cell.copies != 1:
        return None
    return cell.baseline or ("configured" if cell.mode == (lone_mode(spec) or EXCLUSIVE) else None)


def target(spec: ExperimentSpec, cell: Cell) -> float | None:
    """The precision `cell`'s series is to reach (its runs' images/s 95 % CI half-width over their mean): a lone
    baseline's `baseline_precision`, a collocated cell's `cell_precision`; None for a cell with no target."""
    if _study_collocated(spec, cell):
        return spec.cell_precision
    return spec.baseline_precision.get(baseline_of(spec, cell) or "")


def precision_repeat(spec: ExperimentSpec, cell: Cell) -> bool:
    """Whether `cell` is a precision repeat: a repeat past `repeats`, below its series' most repeats
    (`cell_max_repeats` for a collocated cell, else `baseline_max_repeats`), of a series with a `target` (a repeat
    that `again` renews is numbered from `most_repeats` on: always run)."""
    if target(spec, cell) is None:
        return False
    return spec.repeats <= cell.repeat < series_most(spec, _study_collocated(spec, cell))


def _study_collocated(spec: ExperimentSpec, cell: Cell) -> bool:
    """Whether `cell` is one of the study's own cells of jobs sharing the GPU (not a baseline's)."""
    return cell.baseline is None and collocated(spec, cell.mode, cell.copies)


def most_repeats(spec: ExperimentSpec) -> int:
    """The most runs any series of `spec` may have (its repeats and its precision repeats): where `again` numbers a
    new run of a series with a target, so that no lane passes it over."""
    return max(series_most(spec, collocated=True), series_most(spec, collocated=False))


def precision_repeats(spec: ExperimentSpec, plan: Plan) -> list[Cell]:
    """The precision repeats of `spec` that `plan` (`Plan.of` its folder) holds none of, neither run nor under way:
    those a run submits with its planned cells."""
    return [cell for cell in cells(spec) if precision_repeat(spec, cell) and cell not in plan.all]


def still_short(spec: ExperimentSpec, folder: ExperimentFolder, cell: Cell) -> bool:
    """Whether the precision repeat `cell` is to run: its series' complete runs so far (the planned repeats and those
    past them) give its images/s less precisely than its `target` (`series_precision`)."""
    states = folder.cell_states()
    runs = [states[c.cell_id].run for c in cells(spec)
            if c.series == cell.series and c.cell_id in states and states[c.cell_id].status == COMPLETE]
    precision = series_precision([read_run(run) for run in runs])
    return not precision <= (target(spec, cell) or 0.0)  # NaN (one run) is not known either


def series_precision(readings: list[RunReading]) -> float:
    """How precisely a series' runs give its images/s: the 95 % CI half-width over the mean of the runs' aggregate,
    or where their jobs are a mix of workloads, of each workload's images/s (its jobs' summed), the widest. A mix's
    figures weigh each workload by its own lone rate (a ResNet-152's 450 images/s beside a ResNet-26's 700 count
    alike), so its aggregate can be steady while one workload's rate swings; NaN below two runs.

    >>> run = lambda rates: RunReading([{"model": m, "images_per_s": r} for m, r in rates], [],
    ...                                {"aggregate_images_per_s": sum(r for _, r in rates)}, None)
    >>> mix = [run([("r152", r152), ("r26", r26)]) for r152, r26 in ((413, 704), (459, 697), (442, 699))]
    >>> round(series_precision(mix), 3)  # ResNet-152's rate, not the aggregate's (+-2.1 %)
    0.132
    """
    rates: defaultdict[tuple, list[float]] = defaultdict(list)
    for reading in readings:
        for workload, rate in _workload_rates(reading).items():
            rates[workload].append(rate)
    if len(rates) < 2:
        return relative_ci95([reading.summary["aggregate_images_per_s"] for reading in readings])
    spreads = [relative_ci95(series) for series in rates.values()]
    return math.nan if any(math.isnan(spread) for spread in spreads) else max(spreads)  # one not known: none is


def _workload_rates(reading: RunReading) -> dict[tuple, float]:
    """A run's images/s by workload (`analysis.lone.WORKLOAD`): its jobs' rates in the common window (their own
    where it had none), summed over copies of one workload."""
    rates: defaultdict[tuple, float] = defaultdict(float)
    for job in reading.jobs:
        known = [float(job[key]) for key in ("images_per_s_overlap", "images_per_s")
                 if job.get(key) is not None and not math.isnan(job[key])]
        rates[tuple(job.get(key) for key in WORKLOAD)] += known[0] if known else math.nan
    return dict(rates)
