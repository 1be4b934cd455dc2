"""Baselines precise by design: after an experiment's planned cells, the lone baseline cells are repeated (one more
run each time round, or as many as keep every lane busy where fewer baselines than lanes are short; up to
`baseline_max_repeats`) while the baseline they measure is known less precisely than the spec's `baseline_precision`
asks (95 % CI half-width over its mean, `stats.relative_ci95` over its runs' images/s).
`api.run_spec` asks `more_repeats` after each round and runs what it names. Cells queued in Slurm are not waited for:
the next `colloc-kit run` of the spec adds the repeats.

    >>> from colloc_kit.spec import ExperimentSpec, JobSpec
    >>> import tempfile
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", device="cpu", steps=20)], copies=[1, 2],
    ...                       baselines=["configured"], baseline_precision={"configured": 0.1}, baseline_max_repeats=3)
    >>> more_repeats(spec, ExperimentFolder.of(tempfile.mkdtemp(), "x"))   # the planned cells are not done yet
    []
"""

from __future__ import annotations

from colloc_kit.analysis.results import read_run
from colloc_kit.pipeline.cells import EXCLUSIVE, Cell, cells, lone_mode
from colloc_kit.spec import ExperimentSpec
from colloc_kit.stats import relative_ci95
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.folder import ExperimentFolder

__all__ = ["more_repeats", "baseline_of"]


def baseline_of(spec: ExperimentSpec, cell: Cell) -> str | None:
    """Which baseline a lone cell measures (configured, host-matched, gpu-only), or None for a cell that is none."""
    if cell.copies != 1:
        return None
    return cell.baseline or ("configured" if cell.mode == (lone_mode(spec) or EXCLUSIVE) else None)


def more_repeats(spec: ExperimentSpec, folder: ExperimentFolder, lanes: int = 1) -> list[Cell]:
    """The lone cells to run next: for each baseline with a target whose planned runs are all complete, its next
    repeat while its runs' images/s are known less precisely than the target (one run: not known); with `lanes`
    (GPUs) to fill, its next repeats as many as give each lane a cell (a round of one repeat on two GPUs left one idle
    for a whole cell, issue 50)."""
    if not spec.baseline_precision:
        return []
    states = folder.cell_states()
    series: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells(spec):
        kind = baseline_of(spec, cell)
        if kind is not None and kind in spec.baseline_precision:
            series.setdefault((kind, cell.series), []).append(cell)
    short = []
    for (kind, _), lone in series.items():
        done = [c for c in lone if c.cell_id in states and states[c.cell_id].status == COMPLETE]
        if any(c not in done for c in lone if c.repeat < spec.repeats):
            continue
        rates = [read_run(states[c.cell_id].run).summary["aggregate_images_per_s"] for c in done]
        precision = relative_ci95(rates)
        if not precision <= spec.baseline_precision[kind]:  # NaN (one run) is not known either
            short.append([c for c in lone if c not in done])
    each = -(-lanes // len(short)) if short else 0  # at least one a baseline, lanes filled
    return [cell for todo in short for cell in todo[:each]]
