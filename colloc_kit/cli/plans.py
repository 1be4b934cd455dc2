"""What `colloc-kit run ... --plan` prints: every cell, done or to run (baselines' cells and their lone repeats
counted), the wall time it all takes over the lanes (GPUs), and with `--budget-min N` whether that fits N minutes,
said before anything starts.

    colloc-kit run seed-33 --amp off --gpus all --plan --budget-min 20
"""

from __future__ import annotations

import sys

import pandas as pd

from colloc_kit.analysis.results import load
from colloc_kit.experiments import seed as study
from colloc_kit.pipeline import estimate
from colloc_kit.pipeline.cells import cells
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.store.rundir import safe_name

__all__ = ["budget_line", "print_plan", "print_seed_plan"]


def budget_line(budget_min: float, planned_s: float | None, at_most_s: float | None) -> str:
    """Whether the cells fit `budget_min` minutes of wall time: the planned ones (`planned_s`), and with every lone
    repeat a baseline may still need for its precision (`at_most_s`); None: not known yet.

    >>> budget_line(20, 900, 1100)
    'budget 20 min: fits (15.0 min planned, 18.3 at most with every lone repeat)'
    >>> budget_line(20, 900, 1500)
    'budget 20 min: fits unless every lone repeat is needed (15.0 min planned, 25.0 at most)'
    >>> budget_line(20, 1500, 1800)
    'budget 20 min: does not fit (25.0 min planned, 30.0 at most): fewer --repeats or shorter windows'
    """
    head = f"budget {budget_min:g} min:"
    if planned_s is None or at_most_s is None:
        return f"{head} cannot tell yet: no cells of these jobs measured here to estimate from"
    planned, at_most = planned_s / 60, at_most_s / 60
    if at_most <= budget_min:
        return f"{head} fits ({planned:.1f} min planned, {at_most:.1f} at most with every lone repeat)"
    said = f"({planned:.1f} min planned, {at_most:.1f} at most)"
    if planned <= budget_min:
        return f"{head} fits unless every lone repeat is needed {said}"
    return f"{head} does not fit {said}: fewer --repeats or shorter windows"


def print_seed_plan(seed: study.SeedSpec, out: str, budget_min: float | None = None) -> int:
    """The seed experiment's cells, how each runs here, and the wall time they take over the lanes (GPUs) it runs on,
    from the cell time measured in its folder where it has runs; with `budget_min`, whether all of it fits."""
    card = study.Card.here(seed.gpu)
    folder = ExperimentFolder.of(out, seed.experiment)
    runs = load(folder.path).runs if folder.path.is_dir() else None
    if runs is not None and len(runs):  # only runs of the study's own cells: never smallcnn's time for ResNets
        runs = runs[runs["cell_id"].isin({c.cell_id for s in study.experiments(seed, card) for c in cells(s)})]
    cell_time = study.CellTime.of(seed, runs)
    plan = study.plan_rows(seed, card, cell_time)
    rows = pd.DataFrame(plan)
    with pd.option_context("display.width", 250, "display.max_colwidth", 90, "display.max_rows", 500):
        print(rows.drop(columns=["runs", "estimate_s"]).to_string(index=False))
    cannot, lanes = int((~rows["runs"]).sum()), study.lanes(seed)
    runs_here = "run here" if card.on_this_machine else f"would run on {card.model.name}"
    cells_s = study.estimate_s(plan, lanes)
    print(f"\n{seed.experiment}: {len(rows)} cells ({rows['runs'].sum()} {runs_here}, {cannot} cannot be placed), "
          f"{seed.repeats} repeat(s) each; about {cells_s / 3600:.2f} h on {lanes} GPU(s) ({cell_time.source}); "
          f"card: {card.note}; cells already complete under {out}/{seed.experiment} are skipped")
    extra = {c.cell_id: c.repeat >= s.repeats for s in study.experiments(seed, card) for c in cells(s) if c.baseline
             or c.repeat >= s.repeats}  # the baselines' cells (docs/attribution.md), and their repeats if short
    per_cell_s = (cell_time.overhead_s + cell_time.window_s) / lanes
    baseline_s, repeats_s = per_cell_s * (len(extra) - sum(extra.values())), per_cell_s * sum(extra.values())
    print(f"baselines: {len(extra) - sum(extra.values())} more cells, up to {sum(extra.values())} lone repeats: about "
          f"{(baseline_s + repeats_s) / 3600:.2f} h more at most")
    if budget_min is not None:
        print(budget_line(budget_min, cells_s + baseline_s, cells_s + baseline_s + repeats_s))
    return 0


def print_plan(spec: ExperimentSpec, out: str, budget_min: float | None = None) -> int:
    """The cells of `spec`, each done or to run under out/<name>: what `colloc-kit run` would do; with `budget_min`,
    whether it fits."""
    folder = ExperimentFolder.of(out, spec.name)
    for problem in folder.damaged():  # its cells read as not run: said, as `run` and `status` say it
        print(f"colloc-kit: warning: {problem}", file=sys.stderr)
    states = folder.cell_states()
    todo, every = 0, cells(spec)
    for cell in every:
        done, extra = cell.cell_id in states and states[cell.cell_id].status == COMPLETE, cell.repeat >= spec.repeats
        todo += not done and not extra
        print(f"{cell.label:50s} {'done (skipped)' if done else 'while short of its precision' if extra else 'to run'}")
    extras, baseline = sum(c.repeat >= spec.repeats for c in every), sum(bool(c.baseline) for c in every)
    print(f"\n{spec.name}: {todo} of {len(every) - extras} cells to run under {out}/{safe_name(spec.name)} ({baseline} "
          f"of them baselines' cells); up to {extras} more lone runs while a baseline misses its precision target")
    print(estimate.plan_line(spec, out))
    if budget_min is not None:
        print(budget_line(budget_min, *estimate.plan_seconds(spec, out)))
    return 0
