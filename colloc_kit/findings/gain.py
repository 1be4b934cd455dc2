"""Claim 1 judged with its because: every shared cell's gain, with its 95 % CI, held against the claimed 3x by one
rule (`GAIN_RULE`, `gain_outcome`); a cell whose CI spans 3x, or that has no CI, decides nothing but makes the
verdict "cannot tell" wherever it could change it (`verdict.settle`); and, where the summary splits each gain into
the GPU's part and the host's part (`gpu_part`, `host_part`), how much of the best gain was whose.

    >>> cells = pd.DataFrame({"experiment": "seed-33", "workloads": ["r26", "r26"], "kind": ["alone", "MPS"],
    ...     "copies": [1, 3], "amp": ["off", "off"], "normalized_throughput_mean": [1.0, 1.6],
    ...     "normalized_throughput_ci": [0.1, 0.2]})
    >>> judged = judge_gain([("experiment 33 (fp32)", cells)])
    >>> judged["verdict"], judged["decided"][0].text()
    ('disagrees', 'seed-33 r26 MPS x3: 1.60 ± 0.20 x (stays below 3x)')
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from colloc_kit.findings.read import ALONE, KINDS
from colloc_kit.findings.verdict import AGREES, CANNOT_TELL, DISAGREES, Cell, Decision, settle

__all__ = ["CLAIMED_GAIN", "GAIN_RULE", "short_name", "gain_outcome", "judge_cells", "judge_gain", "attribution"]

CLAIMED_GAIN = 3.0  # "up to three times" (EuroMLSys 2024); arXiv v3 says four
CLEARS, BELOW, SPANS, NO_CI = (f"reaches {CLAIMED_GAIN:.0f}x", f"stays below {CLAIMED_GAIN:.0f}x",
                               f"spans {CLAIMED_GAIN:.0f}x", "no CI")
GAIN_RULE = (f"every shared cell's gain, with its 95 % CI, against {CLAIMED_GAIN:.0f}x: agrees where one clears "
             f"{CLAIMED_GAIN:.0f}x (lower bound at or above it), disagrees where every one stays below (upper bound "
             f"under it), cannot tell otherwise: a cell whose CI spans {CLAIMED_GAIN:.0f}x, or that has no CI, "
             "decides nothing and is never left out; the verdict is that of the study's recipe (fp32), other "
             "precisions are reported beside it")


def gain_outcome(cell: Cell) -> str:
    """What one cell shows against the claimed 3x: reaches, stays below, spans it, or no CI to tell.

    >>> gain_outcome(Cell("seed-33", "r26", "MPS", 3, 1.84, 1.17))
    'spans 3x'
    """
    if not cell.known:
        return NO_CI
    return CLEARS if cell.low >= CLAIMED_GAIN else BELOW if cell.high < CLAIMED_GAIN else SPANS


def _rule(seen: list[str]) -> str:
    return AGREES if CLEARS in seen else DISAGREES if seen and set(seen) == {BELOW} else CANNOT_TELL


def _shared(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells where copies shared the card (one MPS client alone is not collocation), with a gain."""
    shared = cells[cells["kind"].isin(KINDS) & (cells["copies"] > 1)] if len(cells) else cells
    return shared.dropna(subset=["normalized_throughput_mean"])


def judge_cells(cells: pd.DataFrame) -> tuple[str, list[Decision], list[Decision]]:
    """Claim 1's verdict on `cells` by `GAIN_RULE`, the decisions that decided it and the cells set aside."""
    found = [Cell.of(row, short_name(row["workloads"])) for _, row in _shared(cells).iterrows()]
    outcomes = [gain_outcome(c) for c in found]
    seen = [o for o in outcomes if o in (CLEARS, BELOW)]
    said = settle(_rule, seen, [(CLEARS, BELOW)] * (len(outcomes) - len(seen)))
    if said == AGREES:
        decided = [Decision((c,), o) for c, o in zip(found, outcomes) if o == CLEARS]
    elif said == DISAGREES:  # every cell below: the one nearest 3x of each workload stands for its others
        nearest: dict[str, Cell] = {}
        for c in found:
            nearest[c.workload] = max(nearest.get(c.workload, c), c, key=lambda x: x.high)
        decided = [Decision((c,), BELOW) for c in nearest.values()]
    else:
        decided = [Decision((c,), o) for c, o in zip(found, outcomes) if o in (SPANS, NO_CI)]
    lacking = cells[cells["kind"].isin(KINDS) & (cells["copies"] > 1) & cells["normalized_throughput_mean"].isna()]
    set_aside = [Decision((), f"{short_name(r['workloads'])} {r['kind']} x{int(r['copies'])}: no lone run to "
                          "divide by") for _, r in lacking.iterrows()]
    return said, decided, set_aside


def short_name(workload: str) -> str:
    """A workload as a verdict names it: 'timm.resnet26 bs128 bf16 seed on cifar10' -> 'resnet26 on cifar10' (the
    batch size stays where it is not the study's 128).

    >>> short_name("timm.resnet26 bs128 bf16 seed on cifar10"), short_name("timm.resnet50 bs32 seed on imagenet64")
    ('resnet26 on cifar10', 'resnet50 bs32 on imagenet64')
    """
    return re.sub(r" bs128| bf16| fp16| seed", "", str(workload).removeprefix("timm."))


def judge_gain(sets: list[tuple[str, pd.DataFrame]]) -> dict:
    """Claim 1's verdict from (scope, cells) pairs, the study's recipe first: the verdict, decisions and cells set
    aside of the first set that has shared cells, what each set shows and why, and the evidence per workload. The
    summary's `gpu_part_mean` and `host_part_mean`, where present, say how much of the best gain was the GPU's and
    the host's."""
    shows, evidence, first = [], [], None
    for scope, cells in sets:
        if _shared(cells).empty:
            continue
        said, decided, set_aside = judge_cells(cells)
        first = first or (scope, said, decided, set_aside, cells)
        where = scope if first[0] == scope else f"{scope}, not the study's recipe"
        shows.append(f"{where}: {said}: " + "; ".join(d.text() for d in decided))
        rows = _best_rows(cells)
        for experiment in dict.fromkeys(str(row["experiment"]) for row in rows):  # one line per experiment
            evidence.append(f"{experiment}{'' if first[0] == scope else ' ' + scope.split(' in ')[-1]}: " + "; ".join(
                f"{_line(row)} (alone: {_alone_evidence(cells, row['workloads'])})" for row in rows
                if str(row["experiment"]) == experiment))
    if first is None:
        return {"verdict": CANNOT_TELL, "shows": "no shared cell with a baseline in the data", "evidence": [],
                "rule": GAIN_RULE, "scope": sets[0][0] if sets else "", "decided": [], "set_aside": []}
    scope, said, decided, set_aside, cells = first
    shows.append(attribution(_best_rows(cells)))
    set_aside += [Decision((), f"{other}: reported beside, not the study's recipe") for other, c in sets
                  if other != scope and len(_shared(c))]
    return {"verdict": said, "shows": "; ".join(shows), "evidence": evidence, "rule": GAIN_RULE, "scope": scope,
            "decided": decided, "set_aside": set_aside}


def _best_rows(cells: pd.DataFrame) -> list[pd.Series]:
    """Each workload's shared cell with the largest gain."""
    shared = _shared(cells)
    return [group.loc[group["normalized_throughput_mean"].idxmax()]
            for _, group in shared.groupby("workloads", sort=True)]


def _line(row: pd.Series) -> str:
    growth = row.get("epoch_time_growth_mean")
    epoch = f", epoch x {growth:.2f}" if _number(growth) else ""
    return (f"{short_name(row['workloads'])}: best {_gain({'mean': row['normalized_throughput_mean'], 'ci': _ci(row)})}"
            f" at {int(row['copies'])} copies ({row['kind']}){epoch}, bound by {_bound(row)}")


def attribution(rows: list[pd.Series]) -> str:
    """How much of the largest decided gain was the host's and how much the GPU's, from the summary's `host_part`
    and `gpu_part` (and `gpu_only_gain`); where the data lacks them, that it lacks host-matched baselines.

    >>> attribution([pd.Series({"workloads": "r50", "normalized_throughput_mean": 1.6, "normalized_throughput_ci": 0.1,
    ...                         "gpu_part_mean": 1.2, "host_part_mean": 0.4})])
    "of r50's gain of 1.60 ± 0.10 x, the GPU's part was 1.20 and the host's part 0.40 (75 % and 25 %)"
    """
    if not rows:
        return "no workload decided, so no gain to split between host and GPU"
    best = max(rows, key=lambda r: r["normalized_throughput_mean"])
    gpu, host = best.get("gpu_part_mean"), best.get("host_part_mean")
    name = short_name(best["workloads"])
    if not (_number(gpu) and _number(host)):
        return ("the data lacks host-matched baselines, so how much of the gain was the host's and how much the "
                "GPU's is not known")
    total = gpu + host
    shares = f" ({100 * gpu / total:.0f} % and {100 * host / total:.0f} %)" if total > 0 else ""
    gpu_only = best.get("gpu_only_gain_mean")
    alone = f"; with the host out of the way the GPU alone gained {gpu_only:.2f} x" if _number(gpu_only) else ""
    return (f"of {name}'s gain of {_gain({'mean': best['normalized_throughput_mean'], 'ci': _ci(best)})}, the GPU's "
            f"part was {gpu:.2f} and the host's part {host:.2f}{shares}{alone}")


def _alone_evidence(cells: pd.DataFrame, workload: str) -> str:
    alone = cells[(cells["workloads"] == workload) & (cells["kind"] == ALONE)]
    if alone.empty:
        return "no lone run"
    row = alone.iloc[0]
    parts = [f"bound by {_bound(row)}"]
    for column, text in (("sm_util_pct_mean", "SMs {:.0f} % active"),
                         ("input_wait_share_mean", "waited for data {:.0%}"),
                         ("host_cpu_util_pct_mean", "host CPU {:.0f} % busy")):
        if column in row and _number(row[column]):
            parts.append(text.format(row[column]))
    return ", ".join(parts)


def _bound(row: pd.Series) -> str:
    return row.get("bound_by") if isinstance(row.get("bound_by"), str) else "unknown"


def _gain(g: dict) -> str:
    return f"{g['mean']:.2f} x (1 repeat, no CI)" if math.isnan(g["ci"]) else f"{g['mean']:.2f} ± {g['ci']:.2f} x"


def _ci(row: pd.Series) -> float:
    ci = row.get("normalized_throughput_ci")
    return float(ci) if _number(ci) else math.nan


def _number(value: Any) -> bool:
    return value is not None and not isinstance(value, str) and bool(pd.notna(value))
