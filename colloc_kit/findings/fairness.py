"""Fairness in the findings: who lost when the study's jobs shared the card (Jain's index and each job's slowdown,
`analysis.fairness`), naive time-slicing against MPS, and whether jobs given a share (MPS partitions, MIG) had it.
It reads `read`'s runs; `render` writes what `fairness_findings` returns as a section of docs/findings.md.

    >>> jobs = shared_jobs(results, "seed-37")                       # doctest: +SKIP
    >>> least_fair(jobs, 3)[["cell", "sharing", "Jain index", "slowdowns"]]   # doctest: +SKIP
    >>> found = fairness_findings(results)                           # doctest: +SKIP
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

import pandas as pd

from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import Results
from colloc_kit.findings.read import MIX_MODELS, MPS, NAIVE, Part, kind_of, mix_label, name_of, summarized

__all__ = ["FAIRNESS_TEXT", "SHARES_TEXT", "shared_jobs", "least_fair", "naive_vs_mps", "shares_table",
           "fairness_findings"]

FAIRNESS_TEXT = ("Jain's index over each job's images/s relative to its lone run (1 = every job kept the same share "
                 "of its lone speed, 1/n = one job had it all); a job's slowdown is its lone images/s over its own. "
                 "Identical jobs of one run that differ are counted here, not as noise: noise is judged from repeats "
                 "of a cell and the lone runs' CIs.")
SHARES_TEXT = ("Each job given a share (an MPS active thread percentage or partition, a MIG instance's SMs) beside "
               "the share it had: its images/s over its lone run's on the whole card. NVML gives no SM figure of a "
               "job's own under MPS (it charges the MPS server) or MIG, so the share had is one of throughput: above "
               "the share asked, the cap did not bind (the job is bound by its input or host); below, it got less "
               "than its slice.")
KEYS = ["experiment", "mode", "mode_label", "copies", "jobs_label"]  # one run configuration (analysis.GROUP_KEYS)
TIE = 0.01  # Jain indexes closer than this are not told apart in the findings


def shared_jobs(results: Results, experiment: str, models: dict[str, str] | None = None,
                part: Part | None = None) -> pd.DataFrame:
    """One row per job of each cell of `experiment` whose jobs shared the card (`analysis.job_summary`, baselines as
    `read.configurations` takes them) with its kind and layout, its model's name in the study (`name`, e.g. 'R26')
    and its `cell` in the study's words: the mix ('R152 + R26 as 1+2'), else the workload and its jobs ('R26 bf16 x3').
    `part`: `read.summarized(results, experiment)` where the caller has it.
    """
    part = summarized(results, experiment) if part is None else part
    jobs = analysis.job_summary(part.results, part.reference, part.runs)
    if jobs.empty:
        return jobs.assign(kind=pd.Series(dtype=str), layout="", name="", cell="")
    models = models or MIX_MODELS
    kinds = [kind_of(mode, label) for mode, label in zip(jobs["mode"], jobs["mode_label"])]
    names = [name_of(model, models) or model for model in jobs["model"]]
    jobs = jobs.assign(kind=[k for k, _ in kinds], layout=[layout or "" for _, layout in kinds], name=names)
    cells = {}
    for key, group in jobs.groupby(KEYS, sort=False, dropna=False):
        amp = " ".join(sorted(set(group["amp"].dropna()) - {"off"}))
        cells[key] = (mix_label(Counter(group["name"])) or
                      f"{group['name'].iloc[0]}{' ' + amp if amp else ''} x{len(group)}")
    return jobs.assign(cell=[cells[key] for key in jobs[KEYS].itertuples(index=False, name=None)])


def _sharing(row: pd.Series) -> str:
    return f"{row['kind']} {row['layout']}".strip()


def _slowdowns(group: pd.DataFrame) -> str:
    """'R152 6.06x, R50 2.18x, R26 1.47x': each job's slowdown, in job order."""
    return ", ".join(f"{r.name} {r.epoch_time_growth_mean:.2f}x" for r in group.sort_values("job").itertuples())


def least_fair(jobs: pd.DataFrame, n: int = 3) -> pd.DataFrame:
    """The `n` cells of `shared_jobs` with the lowest Jain index: experiment, cell, way of sharing, the index (mean
    over repeats), each job's slowdown, repeats."""
    rows = [{"experiment": key[0], "cell": group["cell"].iloc[0], "sharing": _sharing(group.iloc[0]),
             "Jain index": group["fairness_index_mean"].iloc[0], "slowdowns": _slowdowns(group),
             "repeats": int(group["repeats"].max())}
            for key, group in jobs.dropna(subset=["fairness_index_mean"]).groupby(KEYS, sort=False, dropna=False)]
    frame = pd.DataFrame(rows, columns=["experiment", "cell", "sharing", "Jain index", "slowdowns", "repeats"])
    return frame.sort_values("Jain index", kind="stable").head(n).reset_index(drop=True)


def naive_vs_mps(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per cell that ran both naive and under MPS (no limits): the Jain index of each and the job that lost most
    ('R152 6.06x')."""
    rows = []
    both = jobs[jobs["kind"].isin([NAIVE, MPS])].dropna(subset=["fairness_index_mean"])
    for (experiment, cell), group in both.groupby(["experiment", "cell"], sort=True):
        if set(group["kind"]) != {NAIVE, MPS}:
            continue
        row = {"experiment": experiment, "cell": cell}
        for kind, part in group.groupby("kind"):
            worst = part.loc[part["epoch_time_growth_mean"].idxmax()]
            row[f"{kind} index"] = part["fairness_index_mean"].iloc[0]
            row[f"{kind} lost most"] = f"{worst['name']} {worst['epoch_time_growth_mean']:.2f}x"
        rows.append(row)
    return pd.DataFrame(rows, columns=["experiment", "cell", f"{NAIVE} index", f"{NAIVE} lost most", f"{MPS} index",
                                       f"{MPS} lost most"])


def shares_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per cell whose jobs were given a share: each job's share asked -> had, identical ones together
    ('3 x R26 28 % -> 61-62 %')."""
    rows = []
    given = jobs.dropna(subset=["share_asked_pct", "share_had_pct_mean"])
    for _, group in given.groupby(KEYS, sort=True, dropna=False):
        parts = []
        for (name, asked), same in group.groupby(["name", "share_asked_pct"], sort=False):
            low, high = same["share_had_pct_mean"].min(), same["share_had_pct_mean"].max()
            had = f"{low:.0f} %" if round(low) == round(high) else f"{low:.0f}-{high:.0f} %"
            parts.append(f"{len(same)} x {name} {asked:.0f} % -> {had}" if len(same) > 1 else
                         f"{name} {asked:.0f} % -> {had}")
        first = group.iloc[0]
        rows.append({"experiment": first["experiment"], "cell": first["cell"], "sharing": _sharing(first),
                     "asked -> had (share of the card)": ", ".join(parts)})
    table = pd.DataFrame(rows, columns=["experiment", "cell", "sharing", "asked -> had (share of the card)"])
    return table.sort_values(["experiment", "cell", "sharing"], ignore_index=True)


def fairness_findings(results: Results, models: dict[str, str] | None = None,
                      experiments: tuple[str, ...] = ("seed-33", "seed-37"),
                      summaries: Mapping[str, Part] | None = None) -> dict | None:
    """The section's content: `shows` (one line), `evidence` (naive against MPS in each cell where either left a job
    behind, index under 1 - `TIE`; one line for the rest), `least_fair` and `shares` (tables, for reading), `jobs`
    (`shared_jobs` of `experiments`, for a figure); None where no run of `experiments` shared the card with baselines
    for its jobs. `summaries`: `read.summarized` of experiments, where the caller has them."""
    parts = [shared_jobs(results, e, models, (summaries or {}).get(e)) for e in experiments
             if e in set(results.runs.get("experiment", []))]
    parts = [p for p in parts if len(p)]
    jobs = pd.concat(parts, ignore_index=True) if parts else None
    if jobs is None or jobs["fairness_index_mean"].isna().all():
        return None
    worst, versus = least_fair(jobs, 3), naive_vs_mps(jobs)
    naive, mps = versus[f"{NAIVE} index"], versus[f"{MPS} index"]
    at_stake = pd.concat([naive, mps], axis=1).min(axis=1) < 1 - TIE
    first = worst.iloc[0]
    shows = (f"the least fair cell is {first['cell']} under {first['sharing']} (experiment "
             f"{first['experiment'].removeprefix('seed-')}): Jain index {first['Jain index']:.3f}, slowdowns "
             f"{first['slowdowns']}; of the {len(versus)} cells that ran both naive and under MPS, MPS was fairer in "
             f"{int((mps > naive + TIE).sum())}, naive in {int((naive > mps + TIE).sum())} (by more than {TIE})")
    evidence = [f"{r['experiment']} {r['cell']}: naive {r[f'{NAIVE} index']:.3f} ({r[f'{NAIVE} lost most']} lost "
                f"most), MPS {r[f'{MPS} index']:.3f} ({r[f'{MPS} lost most']})"
                for r in versus[at_stake].to_dict("records")]
    if (~at_stake).any():
        low = min(naive[~at_stake].min(), mps[~at_stake].min())
        evidence.append(f"the other {int((~at_stake).sum())} cells kept an index of at least {low:.3f} under both")
    shown = worst.assign(**{"Jain index": worst["Jain index"].map("{:.3f}".format)})
    return {"shows": shows, "evidence": evidence, "least_fair": shown, "shares": shares_table(jobs), "jobs": jobs}
