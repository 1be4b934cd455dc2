"""Claim 1 judged with its because: the largest gain of each workload, in each precision, held against the claimed
3x by a stated rule; a workload whose lone run is too imprecise to decide is excluded and named, never allowed to make
the verdict; and, where the summary splits each gain into the GPU's part and the host's part (`gpu_part`,
`host_part`), how much of the best gain was whose.

    >>> cells = pd.DataFrame({"workloads": ["r26", "r26"], "kind": ["alone", "MPS"], "copies": [1, 3],
    ...     "amp": ["off", "off"], "normalized_throughput_mean": [1.0, 1.6], "normalized_throughput_ci": [0.1, 0.2]})
    >>> judged = judge_gain([("fp32", cells)])
    >>> judged["verdict"], judged["shows"][:60]
    ('disagrees', 'as the study ran it (fp32): disagrees: every decided workloa')
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from colloc_kit.findings.read import ALONE, KINDS

__all__ = ["CLAIMED_GAIN", "IMPRECISE_BASELINE", "GAIN_RULE", "short_name", "judge_gain", "workload_gains",
           "attribution"]

CLAIMED_GAIN = 3.0  # "up to three times" (EuroMLSys 2024); arXiv v3 says four
IMPRECISE_BASELINE = 0.5  # a lone run whose 95 % CI is wider than +-50 % of its mean cannot decide a gain
GAIN_RULE = (f"each workload's largest gain, with its 95 % CI, against {CLAIMED_GAIN:.0f}x: agrees where one clears "
             f"{CLAIMED_GAIN:.0f}x (lower bound at or above it), disagrees where every one stays below (upper bound "
             f"under it), cannot tell otherwise; a workload whose lone run is known only to more than "
             f"±{100 * IMPRECISE_BASELINE:.0f} % is left out; the verdict is that of the study's recipe (fp32), "
             "other precisions are reported beside it")


def workload_gains(cells: pd.DataFrame) -> list[dict]:
    """Per workload of `cells`: its largest gain (mean, CI, copies, way of sharing), how precise its lone run is,
    and the outcome: 'clears', 'below', 'spans' the claimed gain, or 'excluded' (lone run too imprecise)."""
    out = []
    for workload, group in cells.groupby("workloads", sort=True):
        shared = group[group["kind"].isin(KINDS)].dropna(subset=["normalized_throughput_mean"])
        if shared.empty:
            continue
        best = shared.loc[shared["normalized_throughput_mean"].idxmax()]
        lone_ci = _lone_precision(group[group["kind"] == ALONE])
        mean, ci = float(best["normalized_throughput_mean"]), _ci(best)
        margin = 0.0 if math.isnan(ci) else ci
        outcome = ("excluded" if lone_ci > IMPRECISE_BASELINE else "clears" if mean - margin >= CLAIMED_GAIN
                   else "below" if mean + margin < CLAIMED_GAIN else "spans")
        out.append({"workload": short_name(workload), "row": best, "mean": mean, "ci": ci,
                    "lone_ci": lone_ci, "outcome": outcome})
    return out


def short_name(workload: str) -> str:
    """A workload as a verdict names it: 'timm.resnet26 bs128 bf16 seed on cifar10' -> 'resnet26 on cifar10'.

    >>> short_name("timm.resnet26 bs128 bf16 seed on cifar10")
    'resnet26 on cifar10'
    """
    return re.sub(r" bs\d+| bf16| fp16| seed", "", str(workload).removeprefix("timm."))


def _lone_precision(alone: pd.DataFrame) -> float:
    """How precisely the lone run is known: its images/s's 95 % CI over its mean (the noise check's measure), else
    its gain's CI; NaN where unknown."""
    if alone.empty:
        return math.nan
    row = alone.iloc[0]
    mean, ci = row.get("aggregate_images_per_s_mean"), row.get("aggregate_images_per_s_ci")
    if _number(mean) and _number(ci) and mean > 0:
        return float(ci) / float(mean)
    ci = row.get("normalized_throughput_ci")
    return float(ci) if _number(ci) else math.nan


def judge_gain(sets: list[tuple[str, pd.DataFrame]]) -> dict:
    """Claim 1's verdict from (precision, cells) pairs, the study's recipe first: the verdict of the first set that
    has cells, what each set shows and why, and the evidence per workload. The summary's `gpu_part_mean` and
    `host_part_mean`, where present, say how much of the best gain was the GPU's and the host's."""
    shows, evidence, verdict = [], [], None
    for i, (precision, cells) in enumerate(sets):
        judged = workload_gains(cells) if len(cells) else []
        if not judged:
            continue
        decided = [g for g in judged if g["outcome"] != "excluded"]
        outcomes = {g["outcome"] for g in decided}
        said = ("agrees" if "clears" in outcomes else "disagrees" if outcomes == {"below"} else "cannot tell")
        verdict = verdict or said
        where = f"as the study ran it ({precision})" if i == 0 else f"in {precision}, not the study's recipe"
        shows.append(f"{where}: {said}: {_because(judged, decided)}")
        evidence += [f"{precision} {_line(g)}; alone: {_alone_evidence(cells, g['row']['workloads'])}"
                     for g in judged]
    if verdict is None:
        return {"verdict": "cannot tell", "shows": "no shared cell of experiment 33 with a baseline in the data",
                "evidence": [], "rule": GAIN_RULE}
    best_rows = [g["row"] for _, cells in sets[:1] for g in workload_gains(cells) if g["outcome"] != "excluded"]
    shows.append(attribution(best_rows))
    return {"verdict": verdict, "shows": "; ".join(shows), "evidence": evidence, "rule": GAIN_RULE}


def _because(judged: list[dict], decided: list[dict]) -> str:
    """The cells that decided, in words: which cleared, which spanned, which stayed below, which were left out."""
    groups = {"clears": "reaches", "spans": "spans", "below": "stays below"}
    parts = []
    if decided and all(g["outcome"] == "below" for g in decided):
        parts.append(f"every decided workload stays below {CLAIMED_GAIN:.0f}x ("
                     + ", ".join(f"{g['workload']} at most {_gain(g)}" for g in decided) + ")")
    else:
        parts += [f"{g['workload']} {groups[g['outcome']]} {CLAIMED_GAIN:.0f}x with {_gain(g)}" for g in decided]
    parts += [f"{g['workload']} left out: its lone run is known only to ±{100 * g['lone_ci']:.0f} %, too imprecise "
              f"to decide (its best: {_gain(g)})" for g in judged
              if g["outcome"] == "excluded"]
    return "; ".join(parts) if parts else "no workload could decide"


def _line(g: dict) -> str:
    row = g["row"]
    growth = row.get("epoch_time_growth_mean")
    epoch = f", epoch x {growth:.2f}, bound by {_bound(row)}" if _number(growth) else f", bound by {_bound(row)}"
    return (f"{g['workload']}: best {_gain(g)} at {int(row['copies'])} copies ({row['kind']}){epoch}; lone run "
            f"±{100 * g['lone_ci']:.0f} %: {g['outcome']}" if _number(g["lone_ci"]) else
            f"{g['workload']}: best {_gain(g)} at {int(row['copies'])} copies ({row['kind']}){epoch}: {g['outcome']}")


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
