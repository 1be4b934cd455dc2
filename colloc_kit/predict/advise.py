"""The advisor: rank sharing configurations (mode, copies, partition layout) of a mix by the gain the collocation
model predicts (`colloc_kit.predict.model`), with the binding limit and an error band from the validation on the shipped
H100 data; a pairwise table for schedulers; `confirm` runs the top ones on the GPU present, measured beside predicted.
A workload input-bound alone is also offered one job with the copies' loader workers (`predict.host`).

    colloc-kit advise seed-37                                  # experiment 37's mixes from the shipped lone runs
    colloc-kit advise "resnet152 + resnet50" --experiment seed-37 --top 5
    colloc-kit advise resnet18 --reference h100-matrix --copies 2,4,7 --pairs pairs.csv
    colloc-kit advise my-spec.yaml --runs runs/lone --confirm 3 --out runs

    >>> from colloc_kit import reference
    >>> lone = predict_check.profiles(reference.load("h100-80gb"), "seed-37")
    >>> table = advise(parse_mix("resnet152 + resnet50", lone), lone)
    >>> table.iloc[0][["config", "binding"]].tolist()
    ['partitions 3g+4g', 'SMs of its partition']
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import re
import sys
from typing import Iterable, Mapping, Sequence

import pandas as pd

from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import Results, combine
from colloc_kit.errors import BadInput
from colloc_kit.experiments.seed import MIX_MODELS, MIXES
from colloc_kit.gpu.mig_planner import ImpossibleLayout, plan
from colloc_kit.modes import mode_class
from colloc_kit.pipeline import run
from colloc_kit.predict import check as predict_check
from colloc_kit.predict.host import ERROR_BAND, MoreWorkers, host_explains, more_workers
from colloc_kit.predict.model import CALIBRATION, H100, MODES, Calibration, Config, LoneProfile, Target, predict
from colloc_kit.spec import JobSpec
from colloc_kit.worker import check_job, require_gpu

__all__ = ["parse_mix", "configurations", "advise", "pairs", "check_confirmable", "confirm", "seed_mixes", "COLUMNS"]

COLUMNS = ["mix", "config", "mode", "n_jobs", "predicted_gain", "gain_low", "gain_high", "binding",
           "predicted_images_per_s", "fits", "why", "host_explains"]
DEFAULT_COPIES = (2, 3, 4, 7)
PARTITIONS = ("1g", "2g", "3g", "4g", "7g")  # MPS partitions' shapes; MIG's: the target GPU's own profiles
MIX_TERM = re.compile(r"^\s*(?:(\d+)\s*[x*]\s*)?(.+?)\s*$")
MORE_WORKERS = re.compile(r" \d+ workers?$")  # a lone job's label with more loader workers than its recipe's


def parse_mix(text: str, lone: Mapping[str, LoneProfile]) -> tuple[str, ...]:
    """'A + 2 x B' -> the jobs' workload labels; a name may be a label or any unique part of one ('resnet152').

    >>> parse_mix("2 x r26 + r50", {"r26": None, "r50": None})
    ('r26', 'r26', 'r50')
    """
    jobs: list[str] = []
    for term in str(text).split("+"):
        match = MIX_TERM.match(term)
        if not match or not match.group(2):
            raise BadInput(f"mix {text!r}: write workloads joined by '+', e.g. 'resnet152 + 2 x resnet26'")
        count, name = int(match.group(1) or 1), match.group(2)
        if not 1 <= count <= 48:
            raise BadInput(f"mix {text!r}: {count} copies of {name}; give 1 to 48")
        jobs += [_resolve(name, lone)] * count
    return tuple(jobs)


def _resolve(name: str, lone: Mapping[str, LoneProfile]) -> str:
    """The workload label `name` is, or names as whole words of it ('resnet152', never 'resnet15': no prefix
    matches), the one as configured where the others it names are its lone baselines: that one with more loader
    workers (host-matched) or on synthetic data (its GPU-only twin, whose label lacks the dataset); else refused
    with the closest name the lone runs have ("did you mean") and those they have.

    >>> _resolve("resnet26", {"timm.resnet26 bs128": None, "timm.resnet26 bs128 8 workers": None})
    'timm.resnet26 bs128'
    >>> _resolve("resnet152", {"timm.resnet152 bs32 seed on imagenet": None, "timm.resnet152 bs32 seed": None,
    ...                        "timm.resnet152 bs32 seed on imagenet 8 workers": None})
    'timm.resnet152 bs32 seed on imagenet'

    >>> _resolve("resnet15", {"timm.resnet152 bs32": None, "timm.resnet26 bs128": None})
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: no lone run of a workload called 'resnet15'; did you mean 'resnet152'? Name one ...
    """
    if name in lone:
        return name
    whole = re.compile(rf"(?<![a-z0-9]){re.escape(name.lower().strip())}(?![a-z0-9])")
    found = [w for w in lone if whole.search(w.lower())]
    known = "; ".join(sorted(lone)) or "none"
    if not found:
        words = {part for w in lone for part in re.split(r"[\s.]+", w) if part} | set(lone)
        close = difflib.get_close_matches(name.strip(), sorted(words), n=1, cutoff=0.6)
        raise BadInput(f"no lone run of a workload called {name!r}"
                       + (f"; did you mean {close[0]!r}?" if close else ".") + f" Name one with a lone run: {known} "
                       "(a workload not listed needs a lone run of its own first: mode exclusive, copies 1)")
    bases = {MORE_WORKERS.sub("", w) for w in found}  # `analysis.workload_label`: ' 8 workers', ' on cifar10'
    fed = [b for b in bases if not any(other.startswith(f"{b} on ") for other in bases)]  # not another's twin
    if len(fed) == 1 and fed[0] in found:
        return fed[0]  # any others are its baselines: host-matched lone runs, its GPU-only twin
    if len(found) > 1:
        raise BadInput(f"{name!r} names {len(found)} workloads with lone runs ({'; '.join(sorted(found))}): give "
                       "more of the label, or pick one experiment with --experiment")
    return found[0]


def configurations(jobs: Sequence[str], lone: Mapping[str, LoneProfile], target: Target = H100,
                   copies: Iterable[int] = DEFAULT_COPIES, modes: Iterable[str] = MODES) -> list[Config]:
    """Every configuration of a mix: one workload alone runs at each copy count; a mix as given. Modes naive and
    MPS, and MPS partitions and MIG in every layout of one profile per job that the GPU can place (the larger
    slices to the jobs that use more SMs alone)."""
    modes = [m for m in modes if m == "naive" or all(lone[w].device == "cuda" for w in jobs)]
    groups = [tuple(jobs) * n for n in copies] if len(jobs) == 1 else [tuple(jobs)]
    out = []
    for group in groups:
        order = sorted(range(len(group)), key=lambda i: -(lone[group[i]].sm_demand or 0.0))
        for mode in modes:
            if mode not in ("partitions", "mig"):
                out.append(Config(mode, group))
                continue
            for layout in _layouts(len(group), mode, target):
                placed = [""] * len(group)
                for i, profile in zip(order, layout):
                    placed[i] = profile
                out.append(Config(mode, group, tuple(placed)))
    return out


def _layouts(n: int, mode: str, target: Target) -> list[tuple[str, ...]]:
    """The layouts of n profiles (largest first) that the GPU can place."""
    if n > target.model.compute_slices:
        return []
    found = []
    shapes = PARTITIONS if mode == "partitions" else [p.name for p in target.model.profiles if not p.media_extensions]
    for combo in itertools.combinations_with_replacement(reversed(shapes), n):
        try:
            plan(list(combo), target.gpu)
        except ImpossibleLayout:
            continue
        found.append(combo)
    return found


def advise(jobs: Sequence[str], lone: Mapping[str, LoneProfile], target: Target = H100,
           calibration: Calibration = CALIBRATION, copies: Iterable[int] = DEFAULT_COPIES,
           modes: Iterable[str] = MODES, bands: Mapping[str, Mapping[str, float]] | None = None) -> pd.DataFrame:
    """The configurations of a mix ranked by predicted gain (those that do not fit last), one tidy row each:
    gain_low/gain_high is the gain +- the 90th percentile of the mode's held-out error (`predict_check`)."""
    bands = predict_check.error_bands() if bands is None else bands
    rows = []
    for config in configurations(jobs, lone, target, copies, modes):
        p = predict(config, lone, target, calibration)
        band = bands.get(config.mode, {}).get("p90", math.nan)
        rows.append({"mix": config.mix, "config": config.label, "mode": config.mode, "n_jobs": len(config.jobs),
                     "predicted_gain": p.gain, "gain_low": p.gain * (1 - band), "gain_high": p.gain * (1 + band),
                     "binding": p.binding, "predicted_images_per_s": p.aggregate_images_per_s, "fits": p.fits,
                     "why": p.explain(), "_config": config})
    rows += _more_workers_rows(rows, lone, target)
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "_config"])
    frame = frame.sort_values(["fits", "predicted_gain"], ascending=[False, False], ignore_index=True)
    return frame.assign(rank=range(1, len(frame) + 1))


def _more_workers_rows(rows: list[dict], lone: Mapping[str, LoneProfile], target: Target) -> list[dict]:
    """Where the rows' one workload is input-bound alone: a row per copy count for one job given the loader workers
    of those copies (`predict.host`), and each collocation row's `host_explains` (the share of its predicted gain,
    in log terms, that those workers alone would give). Mixes of different workloads get neither."""
    workloads = {w for row in rows for w in row["_config"].jobs}
    profile = lone[next(iter(workloads))] if len(workloads) == 1 else None
    if profile is None or not profile.input_bound or int(profile.job.get("workers") or 0) < 1:
        return []
    own = int(profile.job["workers"])
    guesses = {n: more_workers(profile, n * own, target) for n in sorted({row["n_jobs"] for row in rows})}
    for row in rows:
        row["host_explains"] = host_explains(row["predicted_gain"], guesses[row["n_jobs"]].gain)
    return [{"mix": f"{n} x {profile.workload}", "config": MoreWorkers(profile.workload, g.workers).label,
             "mode": "workers", "n_jobs": 1, "predicted_gain": g.gain, "gain_low": g.gain * (1 - ERROR_BAND),
             "gain_high": g.gain * (1 + ERROR_BAND),
             "binding": g.binding, "predicted_images_per_s": g.images_per_s, "fits": True, "why": g.why,
             "host_explains": 1.0, "_config": MoreWorkers(profile.workload, g.workers)}
            for n, g in guesses.items() if g.workers > own]


def seed_mixes(lone: Mapping[str, LoneProfile]) -> list[tuple[str, ...]]:
    """Experiment 37's fourteen mixes (colloc_kit.experiments.seed.MIXES) as jobs of the workloads in `lone`."""

    out = []
    for names, counts in MIXES.items():
        labels = [_resolve(f"{MIX_MODELS[n][0]} bs{MIX_MODELS[n][2]} seed on {MIX_MODELS[n][1]}", lone)
                  for n in names]
        out += [tuple(label for label, n in zip(labels, count) for _ in range(n)) for count in counts]
    return out


def pairs(lone: Mapping[str, LoneProfile], target: Target = H100, calibration: Calibration = CALIBRATION,
          modes: Sequence[str] = ("naive", "mps"), measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pair of workloads (a job of each, a workload with itself included) under each mode: predicted
    normalized throughput of each job and of the pair, and where `measured` (predict_check.validate's frame)
    has that pair, the measured one: the table Gavel-style schedulers consume."""
    rows = []
    for a, b in itertools.combinations_with_replacement(sorted(lone), 2):
        for mode in modes:
            if mode != "naive" and (lone[a].device != "cuda" or lone[b].device != "cuda"):
                continue
            p = predict(Config(mode, (a, b)), lone, target, calibration)
            seen = _measured_pair(measured, mode, Config(mode, (a, b)).mix)
            rows.append({"workload_a": a, "workload_b": b, "mode": mode, "fits": p.fits,
                         "predicted_a": p.jobs[0].relative if p.fits else math.nan,
                         "predicted_b": p.jobs[1].relative if p.fits else math.nan,
                         "predicted_pair": p.gain, "measured_pair": seen[0], "measured_pair_ci": seen[1],
                         "binding": p.binding})
    return pd.DataFrame(rows)


def _measured_pair(measured: pd.DataFrame | None, mode: str, mix: str) -> tuple[float, float]:
    if measured is None or measured.empty:
        return math.nan, math.nan
    hit = measured[(measured["mode"] == mode) & (measured["mix"] == mix)]
    return (float(hit["measured"].iloc[0]), float(hit["measured_ci"].iloc[0])) if len(hit) else (math.nan, math.nan)


def mode_spec(config: Config | MoreWorkers) -> str | dict[str, str | list[str]]:
    """The kit's mode (what `colloc_kit.run` takes) that runs a configuration."""
    if not isinstance(config, Config) or config.mode not in ("partitions", "mig"):
        return config.mode
    assert config.layout is not None  # a partitions or mig Config always has one
    if config.mode == "partitions":
        return {"name": "mps", "partitions": list(config.layout)}
    return {"name": "mig", "layout": ",".join(config.layout)}


def confirm(table: pd.DataFrame, lone: Mapping[str, LoneProfile], k: int, out: str, name: str = "advise-confirm",
            budget: Mapping | None = None, progress: bool = False) -> pd.DataFrame:
    """Run the top `k` configurations of `advise`'s table (that fit) on the GPU present, each job's lone run first
    (mode exclusive), through the kit's public `colloc_kit.run`; the measured gain (normalized throughput, 95 %
    CI) beside the predicted one. `budget`: the jobs' budget, e.g. {"seconds": 15} (default {"steps": 100})."""

    device = lone[next(iter(lone))].job.get("device", "cuda") if lone else "cuda"
    here = table["_config"].map(lambda config: _runs_here(config, device) is None).astype(bool)
    top = table[table["fits"] & here].head(k)
    skipped = table[table["fits"] & (table["rank"] < (top["rank"].max() if len(top) else math.inf))
                    & ~table["rank"].isin(top["rank"])]
    for _, row in skipped.iterrows():
        print(f"colloc-kit: not confirming {row['config']}: {_runs_here(row['_config'], device)}", file=sys.stderr)
    if top.empty or k < 1:
        raise BadInput(f"--confirm {k}: nothing to run (no configuration that fits and runs here, or K < 1); "
                       "give K >= 1, on a machine whose modes `colloc-kit info` lists as running here")
    budget = dict(budget or {"steps": 100})

    def spec(workload: str) -> dict:
        return {**{f: v for f, v in lone[workload].job.items() if v is not None}, **budget}

    workloads = list(dict.fromkeys(w for c in top["_config"] for w in c.jobs))
    missing = [w for w in workloads if not lone[w].job.get("model")]
    if missing:
        raise BadInput(f"cannot rerun {', '.join(missing)}: its lone profile does not say how it was made (no model)")
    parts = [run([spec(w) for w in workloads], mode="exclusive", out=out, name=name, progress=progress)]
    ids = []
    for config in top["_config"]:
        more = {"workers": config.workers} if isinstance(config, MoreWorkers) else {}
        parts.append(run([{**spec(w), **more} for w in config.jobs], mode=mode_spec(config), out=out, name=name,
                         progress=progress))
        ids.append(list(parts[-1].runs["run_id"]))

    summary = analysis.run_summary(combine(parts))
    lone_rate = float(parts[0].jobs["images_per_s"].astype(float).mean())  # a MoreWorkers row's one workload
    rows = []
    for (_, row), run_ids in zip(top.iterrows(), ids):
        measured, ci = _measured_gain(summary[summary["run_id"].isin(run_ids)], row["_config"], lone_rate)
        rows.append({"rank": row["rank"], "mix": row["mix"], "config": row["config"],
                     "predicted_gain": row["predicted_gain"], "gain_low": row["gain_low"],
                     "gain_high": row["gain_high"], "measured_gain": measured, "measured_gain_ci": ci,
                     "error": measured / row["predicted_gain"] - 1 if measured == measured else math.nan,
                     "run_ids": ",".join(run_ids)})
    return pd.DataFrame(rows)


def _measured_gain(got: pd.DataFrame, config: Config | MoreWorkers, lone_rate: float) -> tuple[float, float]:
    """A confirmed row's measured gain and its CI: a collocation's normalized throughput; one job with more
    loader workers: its images/s over the lone job's with its own workers (its own baseline is itself)."""
    if got.empty:
        return math.nan, math.nan
    if not isinstance(config, MoreWorkers):
        return float(got["normalized_throughput"].mean()), float(got["normalized_throughput_ci"].mean())
    rate = float(got["aggregate_images_per_s"].mean())
    return rate / lone_rate, float(got["aggregate_images_per_s_ci"].mean()) / lone_rate


def check_confirmable(mixes: Sequence[Sequence[str]], lone: Mapping[str, LoneProfile]) -> None:
    """BadInput before the ranking where `confirm` could not rerun the mixes' workloads here: the jobs need a GPU
    and this machine has none, or their data is absent (`worker.check_job`); CPU jobs on synthetic data pass."""
    workloads = [w for w in dict.fromkeys(w for jobs in mixes for w in jobs) if lone[w].job.get("model")]
    on_gpu = [w for w in workloads if lone[w].job.get("device", "cuda") == "cuda"]
    elsewhere = "rank without --confirm, or confirm on a machine that has them (--runs with lone runs made there)"
    if on_gpu:
        try:
            require_gpu()
        except BadInput:
            raise BadInput(f"--confirm: the configurations of {', '.join(on_gpu)} need a GPU (their lone runs ran on "
                           f"one) and this machine has none; {elsewhere}") from None
    for workload in workloads:
        try:
            check_job(JobSpec.from_mapping({k: v for k, v in lone[workload].job.items() if v is not None}))
        except BadInput as exc:
            raise BadInput(f"--confirm cannot rerun {workload} here: {exc}; {elsewhere}") from None


def _runs_here(config: Config | MoreWorkers, device: str) -> str | None:
    """Why `config`'s mode cannot run on this machine's GPU 0 (e.g. MIG with MIG mode off), or None."""

    spec = mode_spec(config)
    return mode_class(spec if isinstance(spec, str) else str(spec["name"])).unavailable_here(device=device)


def local_target(results: Results) -> Target:
    """The target of runs read from a folder: this host's cores; the GPU the runs name (H100 80GB if none)."""

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return predict_check.target_of(results, cores)
