"""The detail behind the verdicts, as tables for readers: the gains of experiments 33-36 and of the mixes of 37, the
cells not run grouped by their reason ("10 cells: a 1g partition holds ..." once), the copies that fit in memory,
the MIG layouts that cannot be placed, and each claim's evidence with its repeated lines grouped.

    >>> cell = {"workloads": "resnet26 bs128", "copies": 2, "kind": "MPS", "normalized_throughput_mean": 1.8,
    ...         "normalized_throughput_ci": 0.05, "bound_by": "gpu"}
    >>> gain_table(pd.DataFrame([cell])).to_dict("records")
    [{'workload': 'resnet26 bs128', 'copies': 2, 'MPS': '1.80 ± 0.05', 'bound by': 'gpu'}]
"""

from __future__ import annotations

import re

import pandas as pd

from colloc_kit.findings.gain import _bound
from colloc_kit.findings.judge import gain_text
from colloc_kit.findings.missing import OUT_OF_MEMORY, PREDICTED, with_margin
from colloc_kit.findings.read import KINDS
from colloc_kit.views.style import counted

__all__ = ["pretty", "gain_table", "mix_table", "not_run_table", "fit_table", "unplaceable", "grouped_evidence",
           "shares_by_layout", "mix_shares", "grouped_fairness"]

COPIES_CELL = re.compile(r"(.+) x\d+")  # a fairness cell of copies of one workload ('R26 x2'); else a mix
GROUPED = (  # evidence lines that a table of the appendix holds: (what the lines say, how many, which table)
    (PREDICTED, "{n} cell(s) " + PREDICTED + " (the kit's check before running)", "not-run"),
    (OUT_OF_MEMORY, "{n} cell(s) whose jobs " + OUT_OF_MEMORY + " (observed)", "not-run"),
    ("steady alone;", "{n} counts of the copies that fit in a card or a MIG profile", "fit"),
    ("cannot be placed", "{n} MIG layout(s) of the study's mixes cannot be placed", "mig"),
)


def pretty(text: str) -> str:
    """The kit's plain-text CI as a reader writes it: '1.80 +- 0.05 x' -> '1.80 ± 0.05 x'."""
    return text.replace(" +- ", " ± ")


def gain_table(cells: pd.DataFrame, copies: tuple[int, ...] = (2, 3, 7)) -> pd.DataFrame:
    """Per workload and copies: the gain under each way of sharing ('1.80 ± 0.05') and what bound the jobs."""
    shared = cells[cells["kind"].isin(KINDS) & cells["copies"].isin(copies)]
    rows = []
    for (workload, n), group in shared.groupby(["workloads", "copies"], sort=True):
        row = {"workload": workload, "copies": int(n)}
        row.update({cell["kind"]: _gain(cell) for _, cell in group.iterrows()})
        row["bound by"] = _bound_by(group)
        rows.append(row)
    return pd.DataFrame(rows, columns=["workload", "copies", *KINDS, "bound by"]).dropna(axis=1, how="all")


def mix_table(cells37: pd.DataFrame) -> pd.DataFrame:
    """One row per mix of experiment 37: its gain under each way of sharing and what bound its jobs."""
    mixes = cells37[cells37["kind"].isin(KINDS)] if len(cells37) else cells37
    if mixes.empty:
        return pd.DataFrame(columns=["mix"])
    mixes = mixes.assign(mix=mixes["mix"].fillna(mixes["jobs_label"]))
    rows = []
    for mix, group in mixes.groupby("mix", sort=False):
        row = {"mix": mix, **{cell["kind"]: _gain(cell) for _, cell in group.iterrows()}}
        row["bound by"] = _bound_by(group)
        rows.append(row)
    return pd.DataFrame(rows, columns=["mix", *KINDS, "bound by"]).dropna(axis=1, how="all")


def _bound_by(cells: pd.DataFrame) -> str:
    """What bound the jobs of one row's cells: one word where every way of sharing agrees, else each's.

    >>> _bound_by(pd.DataFrame({"kind": ["naive", "MPS"], "bound_by": ["input", "mixed: gpu, input"]}))
    'naive: input; MPS: gpu and input (by job)'
    """
    said = {}
    for _, cell in cells.iterrows():
        bound = _bound(cell)
        said[cell["kind"]] = bound.removeprefix("mixed: ").replace(", ", " and ") + " (by job)" \
            if bound.startswith("mixed: ") else bound
    if len(set(said.values())) == 1:
        return next(iter(said.values()))
    return "; ".join(f"{kind}: {bound}" for kind, bound in said.items())


def not_run_table(missing: pd.DataFrame, not_run: pd.DataFrame | None) -> pd.DataFrame:
    """The cells the data lacks or whose jobs failed (experiment 33's `missing_cells` in every precision, the mixes
    of 37 its not-run list names), one row per reason with the cells it holds back.

    >>> missing = pd.DataFrame({"workload": ["r26", "r26"], "kind": ["naive", "MPS"], "copies": [7, 7],
    ...                         "layout": ["", ""], "state": ["not run, predicted not to fit: too big"] * 2})
    >>> not_run_table(missing, None).to_dict("records")
    [{'why': 'not run, predicted not to fit: too big', 'cells': 2, 'which': 'r26: naive x7, MPS x7'}]
    """
    rows = [(r.state, r.workload, f"{r.kind} x{r.copies}" + (f" on {r.layout}" if r.layout else ""))
            for r in missing.itertuples()]
    mixes = not_run[not_run["experiment"] == "seed-37"] if not_run is not None and len(not_run) else None
    if mixes is not None:
        rows += [(f"{PREDICTED}: {with_margin(why)}", "mixes", _mix_cell(cell)) for cell, why in
                 zip(mixes["cell"], mixes["why"])]
    found = []
    for why, group in pd.DataFrame(rows, columns=["why", "workload", "cell"]).groupby("why", sort=False):
        which = "; ".join(f"{w}: {', '.join(g['cell'])}" for w, g in group.groupby("workload", sort=False))
        found.append({"why": why, "cells": len(group), "which": which})
    return pd.DataFrame(found, columns=["why", "cells", "which"])


def _mix_cell(cell: str) -> str:
    """A not-run mix as its models and mode: 'timm.resnet26 + timm.resnet50 bs128 off mps(partitions=1g+2g) x1' ->
    'resnet26 + resnet50 on 1g+2g'."""
    models = " + ".join(m.split(".")[-1] for m in re.findall(r"[\w.]+(?= \+| bs)", cell))
    layout = re.search(r"=([\w+]+)\)", cell)
    return f"{models} on {layout.group(1)}" if layout else models


def fit_table(fit: pd.DataFrame) -> pd.DataFrame:
    """Copies of each workload that fit in each card and its smallest MIG profiles, by its steady footprint alone."""
    shown = fit.dropna(subset=["copies_fit"]) if len(fit) else fit
    if shown.empty:
        return pd.DataFrame(columns=["workload"])
    shown = shown[shown["capacity"].str.endswith(" card") | shown["capacity"].str.contains(" 1g.")]
    table = shown.pivot_table(index=["workload", "steady_gpu_memory_mb"], columns="capacity", values="copies_fit",
                              aggfunc="first", sort=False)
    table = table.reindex(columns=list(dict.fromkeys(shown["capacity"]))).astype("Int64").reset_index()
    return table.rename(columns={"steady_gpu_memory_mb": "steady MiB"})


def unplaceable(placements: pd.DataFrame, gpus: list[str]) -> pd.DataFrame:
    """The study's MIG layouts that cannot be placed on one of `gpus`, with why, per card."""
    present = [g for g in gpus if g in placements]
    if not present:
        return placements.iloc[0:0]
    refused = placements[placements[present].apply(lambda c: c.str.startswith("cannot")).any(axis=1)]
    return refused.assign(**{g: refused[g].str.replace(r"^cannot be placed: impossible on [\w-]+: ", "", regex=True)
                             for g in present})


GAIN = r"\d+\.\d+ \+- \d+\.\d+ x"
RESTATED = re.compile(rf"(?P<cell>.+): (?P<kind>[\w ()]+) {GAIN}(?: against (?P<other>[\w ()]+) {GAIN})?")  # tables'


def grouped_evidence(evidence: list[str], links: dict[str, str]) -> list[str]:
    """A claim's evidence lines, those an appendix table holds replaced by one line each pointing to the table
    (`links`: its name -> a Markdown link): cells that do not fit, copies that fit, layouts that cannot be placed, and
    lines that only restate a cell's gain (one line per way of sharing, naming the cells).

    >>> lines = grouped_evidence(["r26 x2: MPS 1.88 +- 0.18 x", "r26 x3: MPS 2.01 +- 0.18 x",
    ...                           "r50 x2: MPS 1.3 +- 0.1 x, behind naive 1.5 +- 0.1 x"], {"gains": "B", "mixes": "C"})
    >>> lines[0]
    'r50 x2: MPS 1.3 ± 0.1 x, behind naive 1.5 ± 0.1 x'
    >>> lines[1]
    "MPS's gain in 2 cells, as tables B and C give it: r26 x2, r26 x3"
    """
    restated = [m for m in map(RESTATED.fullmatch, evidence) if m]
    kept = [pretty(line) for line in evidence
            if not any(mark in line for mark, _, _ in GROUPED) and not RESTATED.fullmatch(line)]
    for mark, text, table in GROUPED:
        n = sum(mark in line for line in evidence)
        if n:
            kept.append(f"{text.format(n=n)}: table {links[table]}")
    for kind, other in dict.fromkeys((m["kind"], m["other"]) for m in restated):
        cells = [m["cell"] for m in restated if (m["kind"], m["other"]) == (kind, other)]
        said = f"{kind}'s gain" if other is None else f"{kind} against {other}"
        kept.append(f"{said} in {len(cells)} cells, as tables {links['gains']} and {links['mixes']} give it: "
                    + ", ".join(cells))
    return kept


def _gain(cell: pd.Series) -> str:
    """'1.80 ± 0.05' (95 % CI), '1.80' (no CI) or 'no baseline'."""
    return pretty(gain_text(cell)).removesuffix(" x").replace(" x (no CI)", "")


def shares_by_layout(shares: pd.DataFrame) -> pd.DataFrame:
    """`fairness.shares_table`'s cells of copies, one row per workload (its copies' cells side by side, a column per
    layout): '2 x R152 42 % -> 76-79 %' in a row 'R152', column '3g+3g', reads '42 % -> 76-79 %'. The mixes, each in
    a layout of its own: `mix_shares`.

    >>> shares = pd.DataFrame({"experiment": ["e", "e"], "cell": ["R26 x1", "R26 x2"],
    ...                        "sharing": ["MPS partition (not MIG) 4g", "MPS partition (not MIG) 3g+3g"],
    ...                        "asked -> had (share of the card)": ["R26 57 % -> 97 %", "2 x R26 42 % -> 84-87 %"]})
    >>> shares_by_layout(shares).to_dict("records")
    [{'experiment': 'e', 'workload': 'R26', '4g': '57 % -> 97 %', '2 x 3g': '42 % -> 84-87 %'}]
    """
    rows: dict[tuple, dict] = {}
    for r in shares.itertuples(index=False):
        copies = COPIES_CELL.fullmatch(r.cell)
        if copies:
            text = re.sub(r"^(\d+ x )?\S+( \S+)? (?=\d)", "", r[3])  # the share alone
            row = rows.setdefault((r.experiment, copies.group(1)), {"experiment": r.experiment,
                                                                    "workload": copies.group(1)})
            row[_layout(r.sharing)] = text
    return pd.DataFrame(list(rows.values()))


def mix_shares(shares: pd.DataFrame) -> pd.DataFrame:
    """`fairness.shares_table`'s mixes, one row each: its layout and each job's share asked -> had.

    >>> shares = pd.DataFrame({"experiment": ["e"], "cell": ["R152 + R26 as 1+2"],
    ...                        "sharing": ["MPS partition (not MIG) 4g+1g+1g"],
    ...                        "asked -> had (share of the card)": ["R152 57 % -> 70 %, 2 x R26 14 % -> 34 %"]})
    >>> mix_shares(shares).to_dict("records")[0]["layout"]
    '4g+2 x 1g'
    """
    if shares.empty:
        return pd.DataFrame(columns=["experiment", "mix", "layout", "asked -> had (share of the card)"])
    mixes = shares[~shares["cell"].str.fullmatch(COPIES_CELL.pattern)]
    return pd.DataFrame({"experiment": mixes["experiment"], "mix": mixes["cell"],
                         "layout": [_layout(sharing) for sharing in mixes["sharing"]],
                         "asked -> had (share of the card)": mixes["asked -> had (share of the card)"]})


def _layout(sharing: str) -> str:
    """A partitioned way of sharing's layout, identical slices counted: '... 2g+1g+1g' -> '2g+2 x 1g'."""
    return counted(sharing.rsplit(" ", 1)[-1])


FAIRNESS_LINE = re.compile(r"(?P<where>\S+ .+?) as (?P<counts>[\d+]+): naive (?P<naive>[\d.]+) \((?P<naive_lost>\S+) "
                           r"[\d.]+x lost most\), MPS (?P<mps>[\d.]+) \((?P<mps_lost>\S+) [\d.]+x\)")


def grouped_fairness(evidence: list[str]) -> list[str]:
    """The fairness evidence with the cells of one mix family grouped: one line per family and the job each way of
    sharing left behind, the indexes as ranges; lines of another form as they are.

    >>> grouped_fairness(["e R26 + R50 as 1+1: naive 0.981 (R50 1.57x lost most), MPS 0.990 (R50 1.25x)",
    ...                   "e R26 + R50 as 1+2: naive 0.976 (R50 2.42x lost most), MPS 0.963 (R50 1.98x)"])
    ['e R26 + R50 as 1+1, 1+2: naive 0.976-0.981 (R50 lost most), MPS 0.963-0.990 (R50 lost most)']
    """
    groups: dict[tuple, list] = {}
    kept: list = []
    for line in evidence:
        found = FAIRNESS_LINE.fullmatch(line)
        if found is None:
            kept.append(line)
            continue
        key = (found["where"], found["naive_lost"], found["mps_lost"])
        if key not in groups:
            groups[key] = []
            kept.append(key)
        groups[key].append(found)

    def span(values: list[str]) -> str:
        return values[0] if min(values) == max(values) else f"{min(values)}-{max(values)}"

    return [item if isinstance(item, str) else
            f"{item[0]} as {', '.join(f['counts'] for f in groups[item])}: naive "
            f"{span([f['naive'] for f in groups[item]])} ({item[1]} lost most), MPS "
            f"{span([f['mps'] for f in groups[item]])} ({item[2]} lost most)" for item in kept]

