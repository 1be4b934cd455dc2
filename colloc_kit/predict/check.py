"""The collocation model (`colloc_kit.predict.model`) held against measured runs: lone profiles read from runs, the
measured collocated cells, predicted beside measured, the fit of the model's constants, and error bands.

    >>> from colloc_kit import reference
    >>> frame = validate(reference_cells())                                  # doctest: +SKIP
    >>> frame.groupby("mode")["abs_error"].median()                          # doctest: +SKIP
    >>> profiles(reference.load("h100-80gb"), "seed-37")["timm.resnet26 bs128 seed on cifar10"].images_per_s
    1437.08...
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import pandas as pd

from colloc_kit import reference
from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import Results
from colloc_kit.errors import BadInput
from colloc_kit.gpu.mig_catalogue import model_for_device
from colloc_kit.predict import kept
from colloc_kit.predict.model import (
    CALIBRATION,
    H100,
    Calibration,
    Config,
    LoneProfile,
    Target,
    predict,
    with_calibration,
)

__all__ = ["Cell", "profiles", "cells", "reference_cells", "validate", "validate_set", "validated", "target_of",
           "error_bands", "held_out_errors", "fit", "HOLD_OUT", "JOB_FIELDS"]

JOB_FIELDS = ("model", "dataset", "data_root", "batch_size", "amp", "recipe", "image_size", "device", "workers")
HOLD_OUT = "seed-33"  # the experiment the constants are fitted on; every other one is held out
REFERENCE_SETS = ("h100-80gb", "h100-matrix")  # the shipped sets the reference cells are measured in
FITTED_SET = REFERENCE_SETS[0]  # the set whose HOLD_OUT experiment the constants are fitted on
MATRIX_BASELINE = "single-job"  # h100-matrix: the lone runs of the other experiments
GRID = {"naive_efficiency": [0.70 + 0.01 * i for i in range(41)], "mps_capacity": [0.70 + 0.01 * i for i in range(61)],
        "partition_capacity": [0.70 + 0.01 * i for i in range(61)], "sharpness": [2.0, 3.0, 4.0, 6.0, 8.0, 12.0]}
FITTED = {"naive": "naive_efficiency", "mps": "mps_capacity", "partitions": "partition_capacity"}


@dataclass(frozen=True)
class Cell:
    """A measured collocated configuration: its mean gain over repeats with the 95 % CI, and its lone profiles."""

    experiment: str
    config: Config
    measured: float
    measured_ci: float
    repeats: int
    bound_by: str | None
    profiles: Mapping[str, LoneProfile]
    source: str = ""


def _float(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)


def profiles(results: Results, experiment: str | None = None) -> dict[str, LoneProfile]:
    """Workload label -> LoneProfile from the complete exclusive lone jobs (mean over repeats) of `experiment`
    (of every experiment where None: the last experiment, by name, wins a workload run in several)."""
    jobs = analysis.complete(results.jobs)
    if jobs.empty:
        return {}
    lone = jobs[jobs["alone"].astype(bool) & jobs["mode"].eq("exclusive")]
    if experiment is not None:
        lone = lone[lone["experiment"] == experiment]
    if lone.empty:  # (apply over no rows gives a frame, not a column)
        return {}
    out: dict[str, LoneProfile] = {}
    for (exp, label), group in (lone.assign(_w=lone.apply(analysis.workload_label, axis=1))
                                .sort_values("experiment").groupby(["experiment", "_w"], sort=True)):
        out[label] = _profile(label, exp, group)
    return out


def _profile(label: str, experiment: str, group: pd.DataFrame) -> LoneProfile:
    def mean(column: str, scale: float = 1.0) -> float | None:
        return _float(group[column].astype(float).mean() / scale) if column in group else None

    idle = mean("gpu_idle_share")
    first = group.iloc[0]
    job = {k: (None if first.get(k) != first.get(k) else first.get(k)) for k in JOB_FIELDS}
    job = {k: (int(v) if k in ("batch_size", "image_size", "workers") and v is not None else v) for k, v in job.items()}
    return LoneProfile(label, float(group["images_per_s"].astype(float).mean()),
                       gpu_busy=None if idle is None else 1.0 - idle, sm_active=mean("sm_util_pct_mean", 100.0),
                       dram=mean("dram_bw_util_pct_mean", 100.0), input_wait=mean("input_wait_share"),
                       memory_mb=_float(group["steady_gpu_memory_mb"].astype(float).median())
                       if "steady_gpu_memory_mb" in group else None, device=str(first.get("device") or "cuda"),
                       sm_occupancy=mean("sm_occupancy_pct_mean", 100.0), experiment=experiment, job=job)


def config_of(mode: str, mode_label: str, run_jobs: pd.DataFrame) -> Config | None:
    """The model's Config of a measured run (its jobs in order), or None for a mode the model does not cover."""
    labels = tuple(run_jobs.apply(analysis.workload_label, axis=1))
    if mode == "naive" or (mode == "mps" and mode_label == "mps"):
        return Config(mode, labels)
    if mode in ("mps", "mig") and "slot_partition" in run_jobs and run_jobs["slot_partition"].notna().all():
        layout = tuple(str(p).split()[0].split(".")[0] if mode == "mps" else str(p).split()[0]
                       for p in run_jobs["slot_partition"])
        return Config("partitions" if mode == "mps" else "mig", labels, layout)
    return None


def cells(results: Results, lone_from: Results | None = None, lone_experiment: str | None = None,
          source: str = "") -> list[Cell]:
    """Every collocated configuration (two jobs or more at once) of `results` with its measured gain, predicted
    from the lone runs of its own experiment (or of `lone_experiment` in `lone_from`)."""
    reference = None if lone_from is None else lone_from.jobs
    per_run = analysis.run_summary(results, reference=reference)
    summary = analysis.summarize_runs(per_run)
    keys = ["experiment", "mode_label", "copies", "jobs_label"]
    first_run = {tuple(key): run_id for *key, run_id in per_run.drop_duplicates(keys)[[*keys, "run_id"]].itertuples(
        index=False, name=None)}  # each configuration's first run, and every run's jobs: found once
    jobs_of = dict(list(results.jobs.groupby("run_id", sort=False)))
    out, lone_of = [], {}
    for row in summary.itertuples(index=False):
        first = jobs_of[first_run[row.experiment, row.mode_label, row.copies, row.jobs_label]].sort_values("job")
        if len(first) < 2 or bool(first["sequential"].iloc[0]) or row.normalized_throughput_mean != \
                row.normalized_throughput_mean:
            continue
        config = config_of(row.mode, row.mode_label, first)
        if config is None:
            continue
        where = lone_experiment or row.experiment
        if where not in lone_of:
            lone_of[where] = profiles(lone_from if lone_from is not None else results, where)
        out.append(Cell(row.experiment, config, float(row.normalized_throughput_mean),
                        float(row.normalized_throughput_ci), int(row.repeats), row.bound_by, lone_of[where], source))
    return out


@lru_cache(maxsize=1)
def reference_cells() -> tuple[Cell, ...]:
    """The collocated cells of the shipped sets h100-80gb and h100-matrix (the latter from its single-job runs),
    computed once for every process of this kit (`kept`)."""
    return kept.kept("reference-cells", [reference.folder(name) for name in REFERENCE_SETS], _reference_cells)


def _reference_cells() -> tuple[Cell, ...]:
    (seed_name, seed), (matrix_name, matrix) = ((name, reference.load(name)) for name in REFERENCE_SETS)
    lone = matrix.of_experiments([MATRIX_BASELINE])
    others = matrix.of_experiments(sorted(set(matrix.runs["experiment"]) - {MATRIX_BASELINE}))
    return tuple(cells(seed, source=seed_name) + cells(others, lone, MATRIX_BASELINE, source=matrix_name))


def validate(cell_list: Iterable[Cell], calibration: Calibration = CALIBRATION, target: Target = H100) -> \
        pd.DataFrame:
    """Predicted beside measured, one row per cell: `error` = predicted / measured - 1, `abs_error`, `held_out`
    (not the experiment the constants were fitted on), `within_ci` (the prediction inside the measured 95 % CI)."""
    rows = []
    for cell in cell_list:
        p = predict(cell.config, cell.profiles, target, calibration)
        ci = cell.measured_ci if cell.measured_ci == cell.measured_ci else 0.0
        rows.append({"source": cell.source, "experiment": cell.experiment, "mode": cell.config.mode,
                     "config": cell.config.label, "mix": cell.config.mix, "n_jobs": len(cell.config.jobs),
                     "measured": cell.measured, "measured_ci": cell.measured_ci, "repeats": cell.repeats,
                     "predicted": p.gain, "fits": p.fits, "binding": p.binding, "measured_bound_by": cell.bound_by,
                     "error": p.gain / cell.measured - 1 if p.fits else math.nan,
                     "held_out": cell.experiment != HOLD_OUT,
                     "within_ci": bool(p.fits and abs(p.gain - cell.measured) <= ci)})
    frame = pd.DataFrame(rows)
    if len(frame):
        frame["abs_error"] = frame["error"].abs()
    return frame


def target_of(results: Results, host_cores: int = H100.host_cores) -> Target:
    """The Target of measured runs: the GPU they name (an H100 80GB where they name none known) and its memory, with
    `host_cores` cores in blocks of at most 4 a job (the H100's host, the default)."""
    names = results.runs["gpu_name"].dropna().astype(str) if "gpu_name" in results.runs else pd.Series([], dtype=str)
    model = next((m for m in (model_for_device(n) for n in names) if m is not None), None)
    base = H100 if model is None else Target(model.name, model.total_memory_mib)
    return replace(base, host_cores=host_cores)


def validate_set(name: str, calibration: Calibration = CALIBRATION) -> pd.DataFrame:
    """`validate` on the collocated cells of the shipped set `name`, each predicted from that set's own lone runs of
    its experiment, for the GPU its runs name (`target_of`), with `amp` (the jobs' precision: off, bf16) beside.
    Every cell is held out but those of HOLD_OUT in the set the constants are fitted on (FITTED_SET). The cells are
    computed once for every process of this kit (`kept`).

    >>> frame = validate_set("h200-141gb")                   # an H200's cells, from its own lone runs, fp32 and bf16
    >>> len(frame), bool(frame["fits"].all()), frame.groupby("amp")["abs_error"].median().round(3).to_dict()
    (180, True, {'bf16': 0.033, 'off': 0.034})
    """
    target, cell_list = kept.kept(f"set-cells-{name}", [reference.folder(name)], lambda: _set_cells(name))
    frame = validate(cell_list, calibration, target)
    if len(frame):  # validate's rows are the cells in order
        frame["amp"] = ["+".join(sorted({str(c.profiles[w].job.get("amp")) for w in c.config.jobs})) for c in cell_list]
        frame["held_out"] = frame["held_out"] | (name != FITTED_SET)
    return frame


def validated(name: str) -> pd.DataFrame:
    """Predicted beside measured for the cells of the shipped set `name`, for its GPU: the H100 sets the constants
    are fitted beside (REFERENCE_SETS) together, as `validate` holds them; any other set alone (`validate_set`).

    >>> sorted(set(validated("h200-141gb")["experiment"]))
    ['seed-33', 'seed-37']
    """
    return validate(reference_cells()) if name in REFERENCE_SETS else validate_set(name)


def _set_cells(name: str) -> tuple[Target, tuple[Cell, ...]]:
    results = reference.load(name)
    return target_of(results), tuple(cells(results, source=name))


def error_bands(frame: pd.DataFrame | None = None) -> dict[str, dict[str, float]]:
    """Per mode over the held-out cells: median and 90th percentile of the absolute relative error of the gain,
    and the count; MIG, where no MIG cell was measured, takes the MPS partitions' band (cells 0 says so). With no
    frame: the shipped reference data's (computed on first use)."""
    frame = validate(reference_cells()) if frame is None else frame
    held = frame[frame["held_out"] & frame["abs_error"].notna()]
    bands = {mode: {"median": float(g["abs_error"].median()), "p90": float(g["abs_error"].quantile(0.9)),
                    "cells": int(len(g))} for mode, g in held.groupby("mode")}
    if "mig" not in bands and "partitions" in bands:  # no MIG cell measured: MIG-shaped MPS partitions stand in
        bands["mig"] = {**bands["partitions"], "cells": 0}
    return bands


def held_out_errors(frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """`error_bands` as a table, one row per measured mode: cells, median and 90th percentile of the absolute error
    of the gain over the held-out cells. With no frame, the shipped reference data's: the one set of held-out errors
    that the README, notebook 09 and docs/findings.md show.

    >>> held_out_errors().set_index("mode").loc["naive", "cells"]               # doctest: +SKIP
    38
    """
    bands = error_bands(frame)
    return pd.DataFrame([{"mode": mode, **band} for mode, band in bands.items() if band["cells"]],
                        columns=["mode", "cells", "median", "p90"])


def fit(cell_list: Sequence[Cell], base: Calibration = CALIBRATION, label: str = HOLD_OUT) -> Calibration:
    """The constants that minimise the mean absolute error of the gain over `cell_list` (grid search: for each
    sharpness, each mode's constant on that mode's cells; then the sharpness with the least error overall)."""
    if not cell_list:
        raise BadInput("fit needs at least one measured collocated cell")
    best: tuple[float, Calibration] | None = None
    for k in GRID["sharpness"]:
        cal, total = with_calibration(base, sharpness=k), 0.0
        for mode, name in FITTED.items():
            mine = [c for c in cell_list if c.config.mode == mode]
            if not mine:
                continue
            errors = {v: _mean_error(mine, with_calibration(cal, **{name: v})) for v in GRID[name]}
            value = min(errors, key=errors.__getitem__)
            cal, total = with_calibration(cal, **{name: round(value, 2)}), total + errors[value] * len(mine)
        if best is None or total < best[0]:
            best = (total, cal)
    assert best is not None  # GRID has sharpness values
    return with_calibration(best[1], fitted_on=f"{label} ({len(cell_list)} collocated cells)")


def _mean_error(cell_list: Sequence[Cell], calibration: Calibration) -> float:
    errors = [abs(predict(c.config, c.profiles, calibration=calibration).gain / c.measured - 1) for c in cell_list]
    errors = [e for e in errors if e == e]
    return sum(errors) / len(errors) if errors else 0.0
