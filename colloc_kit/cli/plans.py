"""What `colloc-kit run ... --plan` prints: every cell, done or to run (baselines' cells and the precision repeats
counted), the wall time it all takes over the lanes (GPUs), and with `--budget-min N` whether that fits N minutes,
said before anything starts.

    colloc-kit run seed-33 --amp off --gpus all --plan --budget-min 20
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from colloc_kit import reference
from colloc_kit.analysis.results import load
from colloc_kit.cli.skipped import name_damaged
from colloc_kit.experiments import seed as study
from colloc_kit.experiments.seed_run import not_fitting
from colloc_kit.pipeline import estimate
from colloc_kit.pipeline.cells import Cell, cells, warm_launches
from colloc_kit.spec import ExperimentSpec
from colloc_kit.statuses import COMPLETE
from colloc_kit.store.folder import ExperimentFolder
from colloc_kit.store.rundir import safe_name

__all__ = ["budget_line", "card_runs", "launches_line", "print_plan", "print_seed_plan", "seed_seconds"]


def budget_line(budget_min: float, planned_s: float | None, at_most_s: float | None) -> str:
    """Whether the cells fit `budget_min` minutes of wall time: the planned ones (`planned_s`), and with every
    precision repeat a baseline or a collocated cell may still need (`at_most_s`); None: not known yet.

    >>> budget_line(20, 900, 1100)
    'budget 20 min: fits (15.0 min planned, 18.3 at most with every precision repeat)'
    >>> budget_line(20, 900, 1500)
    'budget 20 min: fits unless every precision repeat is needed (15.0 min planned, 25.0 at most)'
    >>> budget_line(20, 1500, 1800)
    'budget 20 min: does not fit (25.0 min planned, 30.0 at most): fewer --repeats or shorter windows'
    """
    head = f"budget {budget_min:g} min:"
    if planned_s is None or at_most_s is None:
        return f"{head} cannot tell yet: no cells of these jobs measured here to estimate from"
    planned, at_most = planned_s / 60, at_most_s / 60
    if at_most <= budget_min:
        return f"{head} fits ({planned:.1f} min planned, {at_most:.1f} at most with every precision repeat)"
    said = f"({planned:.1f} min planned, {at_most:.1f} at most)"
    if planned <= budget_min:
        return f"{head} fits unless every precision repeat is needed {said}"
    return f"{head} does not fit {said}: fewer --repeats or shorter windows"


def launches_line(planned: list[Cell]) -> str:
    """What `--plan` says of the launches warm repeats make of the `planned` cells (`cells.warm_launches`), and how
    many fewer feed swaps make (a GPU-only twin measured on its cell's launch).

    >>> from colloc_kit.spec import ExperimentSpec, JobSpec
    >>> spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn")], copies=[1, 3], repeats=2, warm_repeats=True,
    ...                       baselines=["gpu-only"], feed_swaps=True)
    >>> launches_line(cells(spec))
    'launches: 2 for 8 cells (warm repeats), 2 fewer by feed swaps'
    """
    launches = warm_launches(planned)
    saved = len({c.series for c in planned}) - launches
    return f"launches: {launches} for {len(planned)} cells (warm repeats)" + (
        f", {saved} fewer by feed swaps" if saved else "")


def print_seed_plan(seed: study.SeedSpec, out: str, budget_min: float | None = None) -> int:
    """The seed experiment's cells, how each runs here, and the wall time those not yet complete take over the lanes
    (GPUs) it runs on (`seed_seconds`); with `budget_min`, whether they fit."""
    card = study.Card.here(seed.gpu)
    folder = ExperimentFolder.of(out, seed.experiment)
    name_damaged(folder, "warning: ")  # its cells read as not run: said, as a YAML spec's plan says it
    done = load(folder.path) if folder.path.is_dir() else None
    specs, unfit = [], []  # the modes whose cells the lone runs here say cannot fit: `run` leaves them out, so here
    for spec in study.experiments(seed, card):
        left_out = not_fitting(spec, card, done.jobs if done is not None else None)
        unfit += [f"{label} x{spec.copies[0]} of {spec.jobs[0].model} ({why})" for label, why in left_out.items()]
        if len(left_out) < len(spec.modes):
            specs.append(replace(spec, modes=[mode for mode in spec.modes if mode.label not in left_out]))
    every = list({c.cell_id: c for s in specs for c in cells(s)}.values())  # a lone cell that several of its
    # experiments share (the gpu-only twin alone) counts once, as it runs once
    runs, where = done.runs if done is not None else None, "here"
    if runs is not None and len(runs):  # only runs of the study's own cells: never smallcnn's time for ResNets
        runs = runs[runs["cell_id"].isin({c.cell_id for c in every})]
    if (runs is None or not len(runs)) and (shipped := card_runs(seed, card)) is not None:
        runs, where = shipped, f"of the shipped set {card.model.name.lower()}, measured on this card"
    rows = pd.DataFrame(study.plan_rows(seed, card))
    with pd.option_context("display.width", 250, "display.max_colwidth", 90, "display.max_rows", 500):
        print(rows.drop(columns=["runs"]).to_string(index=False))
    cannot, lanes = int((~rows["runs"]).sum()), study.lanes(seed)
    runs_here = "run here" if card.on_this_machine else f"would run on {card.model.name}"
    states = folder.cell_states()
    todo = [c for c in every if not (c.cell_id in states and states[c.cell_id].status == COMPLETE)]
    planned = [c for c in todo if c.repeat < seed.repeats]
    repeats = [c for c in todo if c.repeat >= seed.repeats]  # precision repeats, run while their series is short
    planned_s, at_most_s, source = seed_seconds(seed, planned, repeats, runs, lanes, where)
    print(f"\n{seed.experiment}: {len(rows)} cells ({rows['runs'].sum()} {runs_here}, {cannot} cannot be placed), "
          f"{seed.repeats} repeat(s) each; card: {card.note}")
    print(f"to run under {out}/{seed.experiment}: {len(planned)} cells ({sum(bool(c.baseline) for c in planned)} of "
          f"them baselines'), up to {len(repeats)} precision repeats while a baseline or a cell misses its target "
          f"({len(every) - len(todo)} complete, skipped); about {planned_s / 60:.1f} min, {at_most_s / 60:.1f} at "
          f"most, on {lanes} GPU(s) ({source})")
    if unfit:
        print("not counted, as the run leaves them out (the lone runs here say they cannot fit):",
              *(f"  {line}" for line in unfit), sep="\n")
    if seed.warm_repeats:
        print(launches_line(planned))
    if budget_min is not None:
        print(budget_line(budget_min, planned_s, at_most_s))
    return 0


def card_runs(seed: study.SeedSpec, card: study.Card) -> pd.DataFrame | None:
    """The runs of `seed`'s experiment in its precisions in the shipped reference set named by this machine's card
    (`h200-141gb` on an H200 141 GB): what a plan estimates from before any cell ran here. None where the card is
    only planned for (no such GPU here) or no shipped set of its name holds such runs.

    >>> card_runs(study.SeedSpec(33), study.Card.planned("H200-141GB")) is None   # no H200 on this machine
    True
    """
    name = card.model.name.lower()
    if not card.on_this_machine or not (reference.SHIPPED / name).is_dir():
        return None
    shipped = reference.load(name)
    ran = shipped.jobs.loc[shipped.jobs["amp"].isin(seed.amp), "run_id"]
    runs = shipped.runs[(shipped.runs["experiment"] == seed.experiment) & shipped.runs["run_id"].isin(ran)]
    return runs if len(runs) else None


def seed_seconds(seed: study.SeedSpec, planned: list[Cell], repeats: list[Cell], runs: pd.DataFrame | None,
                 lanes: int, where: str = "here") -> tuple[float, float, str]:
    """The wall seconds of the `planned` cells and of those with the precision `repeats` too, over `lanes`, and where
    the cell times came from: the lane times of the study's `runs` (per mode, copies and kind of window: start to the
    next start on its GPU, gaps included; `estimate.lane_times`), in its folder or `where` they are from (`card_runs`),
    else the built-in overhead beyond each window (`study.RUN_OVERHEAD_S`; with warm repeats, `study.WARM_OVERHEAD_S`
    for each series' later windows).

    >>> from colloc_kit.spec import ModeSpec
    >>> cell = Cell(ModeSpec("exclusive"), 1, 0, "c")
    >>> [round(s, 1) for s in seed_seconds(study.SeedSpec(33), [cell] * 4, [cell] * 2, None, lanes=2)[:2]]
    [37.6, 56.4]
    >>> [round(s, 1) for s in seed_seconds(study.SeedSpec(33, warm_repeats=True), [cell] * 4, [], None, lanes=2)[:2]]
    [26.4, 26.4]
    """
    measured = estimate.lane_times(runs) if runs is not None and len(runs) else {}
    if not measured:  # a warm repeat's later window: set up by its launch's first (seed.WARM_OVERHEAD_S)
        later = len(planned) - warm_launches(planned) if seed.warm_repeats else 0
        cold_s = (study.RUN_OVERHEAD_S + seed.seconds) / lanes
        planned_s = cold_s * (len(planned) - later) + (study.WARM_OVERHEAD_S + seed.seconds) / lanes * later
        warm = f", {study.WARM_OVERHEAD_S:.1f} s for a warm repeat's later window (two H200s)" if later else ""
        return planned_s, planned_s + cold_s * len(repeats), (
            f"no runs here yet: {study.RUN_OVERHEAD_S:.0f} s of overhead (the H100){warm} + {seed.seconds:.0f} s "
            "windows")
    assert runs is not None  # measured from them
    complete = int((runs["status"] == COMPLETE).sum())
    planned_s, at_most_s = (estimate.wall_s(todo, lanes, measured, seed.warm_repeats) or 0.0
                            for todo in (planned, planned + repeats))
    return planned_s, at_most_s, (f"lane times of {complete} run(s) {where}, per cell: "
                                  f"{estimate.per_cell_text(measured)}")


def print_plan(spec: ExperimentSpec, out: str, budget_min: float | None = None) -> int:
    """The cells of `spec`, each done or to run under out/<name>: what `colloc-kit run` would do; with `budget_min`,
    whether it fits."""
    folder = ExperimentFolder.of(out, spec.name)
    name_damaged(folder, "warning: ")  # its cells read as not run: said, as `run` and `status` say it
    states = folder.cell_states()
    todo, every = 0, cells(spec)
    for cell in every:
        done, extra = cell.cell_id in states and states[cell.cell_id].status == COMPLETE, cell.repeat >= spec.repeats
        todo += not done and not extra
        print(f"{cell.label:50s} {'done (skipped)' if done else 'while short of its precision' if extra else 'to run'}")
    extras, baseline = sum(c.repeat >= spec.repeats for c in every), sum(bool(c.baseline) for c in every)
    print(f"\n{spec.name}: {todo} of {len(every) - extras} cells to run under {out}/{safe_name(spec.name)} ({baseline} "
          f"of them baselines' cells); up to {extras} more runs while a baseline or a cell misses its precision target")
    if spec.warm_repeats:
        print(launches_line([c for c in every if c.repeat < spec.repeats]))
    print(estimate.plan_line(spec, out))
    if budget_min is not None:
        print(budget_line(budget_min, *estimate.plan_seconds(spec, out)))
    return 0
