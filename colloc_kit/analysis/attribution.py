"""Is it the GPU or the host? Every gain split into what sharing the GPU gave and what the copies' extra loader
workers gave. The rules (`figures` lists them; docs/attribution.md says them at more length):

- **Three baselines** of a collocated cell of N jobs, each a lone run in the same experiment (a spec asks for them
  with `baselines: [configured, host-matched, gpu-only]`, `pipeline.cells` plans them): *as configured* (one job with
  its own loader workers: the study's baseline); *host-matched* (one job given the loader workers the N jobs had
  together, N x workers; a lone job already has every core the N jobs shared); *GPU only* (the same model, batch,
  image size and precision on device-resident synthetic data, alone and in the cell's mode and copies).
- **study_gain**: the cell's aggregate images/s over the as-configured lone rate, summed over its jobs: the
  normalized throughput the study reports.
- **gpu_part**: the cell's aggregate over the host-matched lone rate (a mix: the sum over its jobs of each job's
  rate over its host-matched lone rate): what sharing the GPU gave once the host's resources are equal.
- **host_part**: the host-matched lone rate over the as-configured one (a mix: study_gain / gpu_part, a weighted mean
  of its jobs' ratios): what the copies' extra loader workers gave. gpu_part x host_part = study_gain, always.
- **gpu_only_gain**: the synthetic cell's normalized throughput against the synthetic lone job: what the GPU itself
  can gain with no input pipeline. Not a bound on gpu_part: where the host-matched job still waits for its input,
  gpu_part is an upper bound and may exceed it (most MPS cells of the shipped H200 set do).
- **Mixes** of different workloads: each job's host-matched baseline is that job alone with the loader workers of
  the whole cell (the sum of every job's workers), the host resources the cell had.
- **CIs** (95 %): a run's figure combines its aggregate's within-run CI with its baselines' (the relative half-widths'
  root sum of squares, `figures.relative_ci`); over repeats, the repeats' CI with the baselines' (they share them).
- **Notes** (`attribution_note`): no host-matched lone run; a host-matched job still input-bound (its host's part is
  then a lower bound); more loader workers than the job's cores; a baseline known less precisely than its target
  (`spec.baselines.SEED_PRECISION`) with how many lone runs to add.

    >>> round(split_of(rates=[300.0], configured=[100.0], host_matched=[150.0])["host_part"], 2)
    1.5
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from colloc_kit.analysis import figures
from colloc_kit.analysis.lone import BASELINE_KEYS, baselines, complete, in_figures, measured_rate
from colloc_kit.spec.baselines import SEED_PRECISION
from colloc_kit.stats import ci95, plural, plus_minus

__all__ = ["SPLIT", "RUN_COLUMNS", "SHARED", "SUMMARY_COLUMNS", "baseline_kind", "study_cells", "split_of", "per_run",
           "over_repeats"]

SPLIT = ["study_gain", "gpu_part", "host_part", "gpu_only_gain"]
RUN_COLUMNS = ["baseline", *[f"{m}{s}" for m in SPLIT for s in ("", "_ci")], "attribution_note"]
SHARED = ["gpu_part_base_rel", "host_part_base_rel", "task"]  # what a run's repeats share, for `over_repeats`
SUMMARY_COLUMNS = [*[f"{m}_{s}" for m in SPLIT for s in ("mean", "ci")], "attribution_note"]


def baseline_kind(cell_id: Any) -> str | None:
    """Which baseline a run measures, from its cell id ('host-matched-...', 'gpu-only-...'); None for the others."""
    text = str(cell_id or "")
    return next((kind for kind in ("host-matched", "gpu-only") if text.startswith(kind + "-")), None)


def study_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows (runs, summarized cells, or jobs by their cell id) of the study's own cells: a baseline's runs
    (host-matched, GPU-only) show in the split of the cells they divide, never as cells of their own.

    >>> rows = pd.DataFrame({"copies": [3, 1, 3], "baseline": [None, "host-matched", "gpu-only"]})
    >>> study_cells(rows)["copies"].tolist()
    [3]
    >>> study_cells(pd.DataFrame({"cell_id": ["mps-x3-r0", "gpu-only-mps-x3-r0"]}))["cell_id"].tolist()
    ['mps-x3-r0']
    """
    if "baseline" in rows:
        return rows[rows["baseline"].isna()]
    return rows[rows["cell_id"].map(baseline_kind).isna()] if "cell_id" in rows else rows


def split_of(rates: list[float], configured: list[float], host_matched: list[float]) -> dict:
    """study_gain, gpu_part and host_part of one run from its jobs' rates and each job's two lone rates."""
    study = sum(r / c for r, c in zip(rates, configured))
    gpu = sum(r / h for r, h in zip(rates, host_matched))
    return {"study_gain": study, "gpu_part": gpu, "host_part": study / gpu if gpu else math.nan}


def per_run(runs: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """`runs` (`summaries.run_summary`'s rows) with `RUN_COLUMNS` and the baselines' relative CIs the repeats share
    (`gpu_part_base_rel`, `host_part_base_rel`); `jobs`: the jobs with their as-configured baselines joined."""
    runs = runs.assign(baseline=[baseline_kind(c) for c in runs.get("cell_id", pd.Series(None, runs.index))])
    alone = complete(jobs)[complete(jobs)["alone"].astype(bool)] if len(jobs) and "bound_by" in jobs else jobs[:0]
    verdicts = alone.groupby(BASELINE_KEYS, dropna=False)["bound_by"].agg(
        lambda v: v.mode().iloc[0] if v.notna().any() else None).rename("lone_bound_by") if len(alone) else None
    base = baselines(jobs).set_index(BASELINE_KEYS)
    base = (base.join(verdicts) if verdicts is not None else base.assign(lone_bound_by=None)).reset_index()
    read = jobs[[c for c in _SPLIT_JOBS if c in jobs]].assign(  # a run's rows cut from these columns only
        baseline_keys=list(jobs.reindex(columns=BASELINE_KEYS).itertuples(index=False, name=None)))
    of_run, tasks = dict(list(read.groupby("run_id", sort=False))), _tasks(jobs)  # each run's, found once
    lone = _by_key(base)
    rows = [_split(run, of_run.get(run["run_id"], read[:0]), lone, tasks.get(run["run_id"], ""))
            for _, run in runs.iterrows()]
    out = pd.concat([runs.reset_index(drop=True), pd.DataFrame(rows, columns=_SPLIT_ROW)], axis=1)
    twins = _twins_by_key(out)
    out["gpu_only_gain"], out["gpu_only_gain_ci"] = zip(*[_twin(run, twins) for _, run in out.iterrows()]) \
        if len(out) else ([], [])
    return out


_SPLIT_ROW = ["study_gain", "study_gain_ci", "gpu_part", "gpu_part_ci", "host_part", "host_part_ci",
              "gpu_part_base_rel", "host_part_base_rel", "attribution_note", "task"]
_SPLIT_JOBS = ["run_id", "status", "images_per_s", "images_per_s_overlap", "sequential", "workers",
               "baseline_images_per_s", "baseline_jobs", "cores_allowed"]  # the jobs' columns `_split`, `_notes` read
_WORKERS = BASELINE_KEYS.index("workers")
_TWIN_KEYS = ["experiment", "mode_label", "copies", "task"]  # a run and its GPU-only twins have these equal


def _split(run: pd.Series, jobs: pd.DataFrame, lone_of: dict[tuple, dict], task: str) -> dict:
    """One run's split (`split_of`) with its CIs and notes; NaN for a lone, sequential or baseline run. `lone_of`:
    the lone baselines by their keys (`_by_key`); `jobs` has each job's `BASELINE_KEYS` values in `baseline_keys`."""
    counted = jobs[in_figures(jobs)]
    out = dict.fromkeys(_SPLIT_ROW, math.nan) | {"attribution_note": None, "task": task,
                                                 "study_gain": run["normalized_throughput"],
                                                 "study_gain_ci": run["normalized_throughput_ci"]}
    if isinstance(run["baseline"], str) or len(jobs) < 2 or bool(jobs["sequential"].iloc[0]) or counted.empty:
        return out
    workers = int(jobs["workers"].sum()) if jobs["workers"].notna().all() else None
    lone = [_lone(lone_of, keys, workers) for keys in counted["baseline_keys"]]
    matched = [m for m in lone if m is not None]
    if workers is None or len(matched) < len(lone):
        return out | {"attribution_note": f"no host-matched lone run ({workers} workers): add host-matched to the "
                                          "spec's baselines"}
    rates, configured = list(measured_rate(counted)), list(counted["baseline_images_per_s"].astype(float))
    parts = split_of(rates, configured, [m["baseline_images_per_s"] for m in matched])
    hm_rel = sum(m["baseline_images_per_s_ci"] / m["baseline_images_per_s"] for m in matched) / len(matched)
    conf_rel = float(run["baseline_rel_ci"])
    agg = (float(run["aggregate_images_per_s"]), _zero_nan(run["aggregate_images_per_s_ci"]))
    out |= parts | {"gpu_part_base_rel": hm_rel, "host_part_base_rel": math.hypot(_zero_nan(hm_rel),
                                                                                  _zero_nan(conf_rel))}
    out["gpu_part_ci"] = parts["gpu_part"] * figures.relative_ci(agg, (1.0, _zero_nan(hm_rel)))
    out["host_part_ci"] = parts["host_part"] * out["host_part_base_rel"]
    out["attribution_note"] = _notes(matched, workers, hm_rel, conf_rel, counted)
    return out


def _by_key(base: pd.DataFrame) -> dict[tuple, dict]:
    """Each row of `base` (one per lone baseline) by its `BASELINE_KEYS` values (`_key`), the first row where
    several share them: the index `_lone` looks a job's host-matched baseline up in.

    >>> base = pd.DataFrame([dict.fromkeys(BASELINE_KEYS, "x") | {"data_root": None, "rate": r} for r in (1, 2)])
    >>> _by_key(base)[_key(base.loc[0, BASELINE_KEYS])]["rate"] == 1
    True
    """
    out: dict[tuple, dict] = {}
    for position, values in enumerate(base[BASELINE_KEYS].itertuples(index=False, name=None)):
        key = _key(values)
        if key not in out:
            out[key] = base.iloc[position].to_dict()
    return out


def _key(values: Any) -> tuple:
    """Values as a dictionary key: equal values match, and an empty value (None, NaN, NA) matches another.

    >>> _key([1, math.nan, None, "a"]) == _key([1.0, None, pd.NA, "a"])
    True
    """
    return tuple(None if pd.isna(value) else value for value in values)


def _lone(lone_of: dict[tuple, dict], keys: tuple, workers: int | None) -> dict | None:
    """The host-matched lone baseline of a job (`keys`: its `BASELINE_KEYS` values; its workload with `workers`
    loader workers) in `lone_of` (`_by_key`), or None."""
    if workers is None:
        return None
    return lone_of.get(_key((*keys[:_WORKERS], workers, *keys[_WORKERS + 1:])))


def _notes(matched: list[dict], workers: int, hm_rel: float, conf_rel: float, jobs: pd.DataFrame) -> str | None:
    """What makes a run's split less than a clean answer, in words."""
    notes = []
    if any(m.get("lone_bound_by") == "input" for m in matched):
        notes.append("the host-matched job is still input-bound: the host's part is a lower bound")
    cores = jobs["cores_allowed"].dropna() if "cores_allowed" in jobs else pd.Series(dtype=float)
    if len(cores) and workers > cores.sum():
        notes.append(f"{workers} loader workers are more than the {int(cores.sum())} cores the jobs had")
    for kind, rel in (("host-matched", hm_rel), ("configured", conf_rel)):
        runs = int(matched[0]["baseline_jobs"]) if kind == "host-matched" else int(jobs["baseline_jobs"].iloc[0])
        if rel == rel and rel > SEED_PRECISION[kind]:
            more = math.ceil(runs * (rel / SEED_PRECISION[kind]) ** 2) - runs
            notes.append(f"{kind} baseline known to {plus_minus(rel)} over {plural(runs, 'run')} (target "
                         f"{plus_minus(SEED_PRECISION[kind])}): add about {plural(more, 'lone run')} (the spec's "
                         f"baseline_max_repeats at least {runs + more}, then run it again)")
    return "; ".join(notes) or None


def _tasks(jobs: pd.DataFrame) -> dict[Any, str]:
    """What each run's jobs compute, by run id, whatever data they read or workers they had: its GPU-only twin has
    the same.

    >>> _tasks(pd.DataFrame({"run_id": ["a", "a", "b"], "model": ["m2", "m1", "m1"], "batch_size": 8, "amp": "off",
    ...                      "image_size": 32, "device": "cpu"}))
    {'a': 'm1 8 off None 32 cpu + m2 8 off None 32 cpu', 'b': 'm1 8 off None 32 cpu'}
    """
    keys = ["model", "batch_size", "amp", "recipe", "image_size", "device"]
    each = [" ".join(str(job.get(k)) for k in keys)  # (a key the frame lacks reads None)
            for job in jobs[[k for k in keys if k in jobs]].to_dict("records")]
    return {run_id: " + ".join(sorted(task))
            for run_id, task in pd.Series(each, jobs.index, dtype=object).groupby(jobs["run_id"], sort=False)}


def _twins_by_key(runs: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """The GPU-only runs of `runs` by their `_TWIN_KEYS`, in their order: `_twin` looks a run's twins up there. A
    key with an empty value is left out: it is equal to none (as `==` has it).

    >>> runs = pd.DataFrame({"baseline": ["gpu-only", None, "gpu-only"], "experiment": "e", "mode_label": "mps",
    ...                      "copies": [2, 2, None], "task": "m"})
    >>> list(_twins_by_key(runs))
    [('e', 'mps', 2.0, 'm')]
    """
    gpu_only = runs[runs["baseline"] == "gpu-only"]
    return {tuple(keys): twins for keys, twins in gpu_only.groupby(_TWIN_KEYS, sort=False)}


def _twin(run: pd.Series, twins_of: dict[tuple, pd.DataFrame]) -> tuple[float, float]:
    """A run's GPU-only gain: the mean normalized throughput of its synthetic twins (same experiment, mode, copies
    and task; `twins_of`: `_twins_by_key`) with its CI (over them where several, else the twin's own)."""
    twins = twins_of.get(tuple(run[k] for k in _TWIN_KEYS))
    if isinstance(run["baseline"], str) or pd.isna(run["gpu_part"]) or twins is None:
        return math.nan, math.nan
    values = twins["normalized_throughput"].astype(float).dropna()
    if values.empty:
        return math.nan, math.nan
    mean, ci = ci95(values)
    return mean, ci if len(values) > 1 else float(twins["normalized_throughput_ci"].iloc[0])


def over_repeats(group: pd.DataFrame) -> dict:
    """A configuration's `SUMMARY_COLUMNS` over its repeats but study_gain's (`summarize`'s normalized throughput):
    the mean, and a CI that combines the repeats' spread with the baselines they share (a single run: its own CI;
    gpu_only_gain: its twins', the same for every repeat)."""
    row: dict = {}
    for metric in ("gpu_part", "host_part", "gpu_only_gain"):
        values = group[metric].astype(float)
        mean = values.mean()
        row[f"{metric}_mean"] = mean
        if len(values.dropna()) < 2 or metric == "gpu_only_gain":
            row[f"{metric}_ci"] = group[f"{metric}_ci"].astype(float).mean()
            continue
        shared = _zero_nan(group[f"{metric}_base_rel"].astype(float).mean())
        row[f"{metric}_ci"] = mean * figures.relative_ci((mean, _zero_nan(ci95(values)[1])), (1.0, shared))
    notes = group["attribution_note"].dropna()
    row["attribution_note"] = "; ".join(dict.fromkeys(n for note in notes for n in note.split("; "))) or None
    return row


def _zero_nan(value: Any) -> float:
    value = float(value) if value is not None else math.nan
    return 0.0 if math.isnan(value) else value
