"""Claims 3 and 4 judged: ways of sharing held against each other in the cells that ran them side by side (the same
workload and copies, or the same mix), by their gains' 95 % CIs (`verdict.ahead`). Claim 3 is about MIG's isolated
partitions and is judged on MIG cells only: MPS partitions shaped like MIG's share SMs and memory bandwidth, so where
the data has no MIG cell the verdict is "not measured here" and the partitions are reported beside it.

    >>> cells = pd.DataFrame({"experiment": "seed-33", "workloads": "r26", "mix": None, "copies": 7,
    ...     "kind": ["MPS", "MPS partition (not MIG)"], "normalized_throughput_mean": [1.74, 1.84],
    ...     "normalized_throughput_ci": [0.04, 0.05]})
    >>> judged = judge_mps(cells, cells.iloc[0:0], "experiment 33")
    >>> judged["verdict"], judged["decided"][0].outcome
    ('disagrees', 'MPS behind MPS partition (not MIG) beyond the CIs')
"""

from __future__ import annotations

from typing import Iterator

import pandas as pd

from colloc_kit.findings.gain import short_name
from colloc_kit.findings.read import KINDS, MIG, MPS, PARTITION
from colloc_kit.findings.verdict import (
    AGREES, CANNOT_TELL, DISAGREES, NOT_MEASURED, PARTLY, Cell, Decision, ahead, settle, verdict,
)

__all__ = ["MIG_CLAIM", "MPS_CLAIM", "NOT_MIG", "comparable", "judge_mig", "judge_mps"]

MIG_CLAIM = ("MIG's interference-free partitions help when the models' sizes align with its profiles; its rigid "
             "partitioning can leave the GPU under-used for mixed workloads.")
MPS_CLAIM = "MPS is the best performing and most flexible way of collocation for a single user."
NOT_MIG = "not measured here (MPS partitions stand in for MIG; they do not isolate)"
BEST, WITHIN, BEHIND = "MPS best", "MPS within the CIs of the best", "MPS behind"
ALIGNED_OK, ALIGNED_BEHIND = "copies on MIG not behind MPS beyond the CIs", "copies on MIG behind MPS beyond the CIs"
MIX_BEHIND, MIX_OK = "mix on MIG behind MPS beyond the CIs", "mix on MIG not behind MPS beyond the CIs"


def comparable(cells: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Groups of cells that trained the same thing (workload and copies, or mix) under different ways of sharing,
    keyed 'seed-34 resnet50 bs32 on imagenet64 x7' or 'seed-37 R26 + R50 as 2+1'."""
    shared = cells[cells["kind"].isin(KINDS)].dropna(subset=["normalized_throughput_mean"]) if len(cells) else cells
    shared = shared[(shared["copies"] > 1) | shared["mix"].notna()]  # jobs that shared the card, not one alone
    names = shared["workloads"].map(short_name) + " x" + shared["copies"].astype(str)
    keys = shared["experiment"].astype(str) + " " + shared["mix"].fillna(names)
    for key, group in shared.groupby(keys, sort=True):
        if group["kind"].nunique() > 1:
            yield key, group


def _cell(group: pd.DataFrame, kind: str, key: str) -> Cell:
    row = group[group["kind"] == kind].iloc[0]
    return Cell.of(row, key.split(" ", 1)[1].rsplit(" x", 1)[0] if row["mix"] is None or pd.isna(row["mix"])
                   else row["mix"])


def _pairs(cells: pd.DataFrame, a: str, b: str) -> list[tuple[Cell, Cell]]:
    return [(_cell(g, a, key), _cell(g, b, key)) for key, g in comparable(cells) if {a, b} <= set(g["kind"])]


def judge_mig(copies: pd.DataFrame, mixes: pd.DataFrame, placements: pd.DataFrame, gpu: str) -> dict:
    """Claim 3 on the MIG cells of `copies` (equal copies) and `mixes` (experiment 37), against MPS beside them."""
    scope = "equal copies (experiments 33-36) and mixes (37) that ran on MIG beside MPS"
    refused = placements[placements[gpu].str.startswith("cannot")] if gpu in placements else placements.iloc[0:0]
    evidence = [f"MIG {r['layout']} for {r['mix']} {r[gpu]}" for _, r in refused.iterrows()]
    aligned, mixed = _pairs(copies, MIG, MPS), _pairs(mixes, MIG, MPS)
    if not aligned and not mixed:
        stand_ins = [Decision(pair, _versus(*pair)) for cells in (copies, mixes) for pair in _pairs(cells, PARTITION,
                                                                                                   MPS)]
        set_aside = [Decision(d.cells, f"MPS partition, not MIG: {d.outcome}") for d in stand_ins]
        shows = (f"{NOT_MIG}; beside it, not deciding: MPS partitions against free MPS in {len(stand_ins)} cells "
                 f"({_counted(d.outcome for d in stand_ins)}); {len(refused)} of the study's {len(placements)} mixes "
                 f"cannot be placed as MIG on {gpu}")
        return verdict(MIG_CLAIM, NOT_MEASURED, shows, _MIG_RULE, scope, [], set_aside, evidence)
    decided, seen, undecided = [], [], []
    for pairs, sides in ((aligned, (ALIGNED_OK, ALIGNED_BEHIND)), (mixed, (MIX_OK, MIX_BEHIND))):
        for mig, mps in pairs:
            behind = ahead(mps, mig)
            outcome = sides[1] if behind else sides[0] if behind is False else "undecided: a CI unknown"
            (seen.append(outcome) if behind is not None else undecided.append(sides))
            decided.append(Decision((mig, mps), outcome))
    said = settle(_mig_rule, seen, undecided)
    return verdict(MIG_CLAIM, said, _counted(d.outcome for d in decided), _MIG_RULE, scope, decided, [], evidence)


_MIG_RULE = (f"agrees where every copy cell on MIG is within the 95 % CIs of MPS or ahead ({ALIGNED_OK}) and some mix "
             f"on MIG falls behind MPS beyond the CIs (rigid shapes leave the GPU under-used); disagrees where "
             f"neither holds, partly where one does; cannot tell where a cell without a CI could change that, or "
             f"either kind of cell is missing; judged on MIG cells only")


def _mig_rule(seen: list[str]) -> str:
    if not ({ALIGNED_OK, ALIGNED_BEHIND} & set(seen)) or not ({MIX_OK, MIX_BEHIND} & set(seen)):
        return CANNOT_TELL
    holds = [ALIGNED_BEHIND not in seen, MIX_BEHIND in seen]
    return AGREES if all(holds) else PARTLY if any(holds) else DISAGREES


def _versus(a: Cell, b: Cell) -> str:
    """'ahead of MPS beyond the CIs', 'behind MPS beyond the CIs', 'within the CIs of MPS' (or 'no CI')."""
    if ahead(a, b):
        return f"ahead of {b.kind} beyond the CIs"
    if ahead(b, a):
        return f"behind {b.kind} beyond the CIs"
    return f"within the CIs of {b.kind}" if a.known and b.known else "no CI to compare"


def _counted(outcomes: Iterator[str] | list[str]) -> str:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{outcome} in {n}" for outcome, n in counts.items())


def judge_mps(copies: pd.DataFrame, mixes: pd.DataFrame, scope: str) -> dict:
    """Claim 4: in each group of `comparable` cells of `copies` and `mixes`, MPS against the best other way."""
    decided, seen, undecided, set_aside = [], [], [], []
    for cells in (copies, mixes):
        for key, group in comparable(cells):
            if MPS not in set(group["kind"]):
                set_aside.append(Decision((), f"{key}: no MPS cell beside {', '.join(sorted(set(group['kind'])))}"))
                continue
            others = group[group["kind"] != MPS]
            best = _cell(others, others.loc[others["normalized_throughput_mean"].idxmax(), "kind"], key)
            mps = _cell(group, MPS, key)
            behind = False if mps.value >= best.value else ahead(best, mps)
            outcome = BEST if mps.value >= best.value else f"{BEHIND} {best.kind} beyond the CIs" if behind else \
                f"{WITHIN.replace('the best', best.kind)}" if behind is False else "undecided: a CI unknown"
            (seen.append(BEHIND if behind else BEST) if behind is not None else undecided.append((BEST, BEHIND)))
            decided.append(Decision((mps, best), outcome))
    if not decided:
        return verdict(MPS_CLAIM, CANNOT_TELL, "no cell has MPS beside another way of sharing", "", scope,
                       [], set_aside)
    said = settle(_mps_rule, seen, undecided)
    wins = seen.count(BEST)
    shows = (f"MPS was best or within the 95 % CIs of the best in {wins} of {len(decided)} cells"
             + (f"; {len(undecided)} cell(s) without a CI" if undecided else ""))
    return verdict(MPS_CLAIM, said, shows, _MPS_RULE, scope, decided, set_aside)


_MPS_RULE = ("agrees where MPS was best or within the 95 % CIs of the best in every cell that ran it beside another "
             "way of sharing, partly in at least half, disagrees otherwise; a cell without a CI that could change "
             "that makes it cannot tell")


def _mps_rule(seen: list[str]) -> str:
    wins = seen.count(BEST)
    return AGREES if wins == len(seen) else PARTLY if wins * 2 >= len(seen) else DISAGREES
