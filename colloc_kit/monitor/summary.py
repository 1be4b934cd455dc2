"""Summaries of a GPU series over a time window: mean, median and 95th percentile of each metric, and energy.

Energy comes two ways: from NVML's energy counter (`energy_j`; where the counter went backwards, a reset or a
wrap, that one interval is taken from the power readings and counted in `energy_counter_restarts`), and from
power integrated over the samples (`energy_power_integral_j`, trapezoids). Both are interpolated at the window's
edges, so a window between two samples is cut exactly. The window is clipped to the span with
readings (`sampled_s`).

    >>> s = summarize(samples.gpu, start=t0, end=t1)                     # doctest: +SKIP
    >>> s["sm_occupancy_pct_mean"], s["energy_j"], s["avg_power_w"]      # doctest: +SKIP
    (47.9, 10234.5, 402.1)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["NOT_METRICS", "STATS", "counter_energy_j", "power_integral_j", "summarize", "window_energy"]

NOT_METRICS = frozenset({"t", "gpu", "gpu_instance_id", "pid", "energy_mj", "clock_event_reasons", "mem_total_mb"})
STATS = (("mean", None), ("p50", 0.5), ("p95", 0.95))


def summarize(samples_gpu: pd.DataFrame, start: float, end: float) -> dict[str, float | int | None]:
    """Per-window figures of one GPU's samples between `start` and `end` (kit clock seconds)."""
    if not end > start:
        raise ValueError(f"the window must end after it starts, got start={start} end={end}")
    frame = samples_gpu.sort_values("t") if len(samples_gpu) else samples_gpu
    inside = frame[(frame["t"] >= start) & (frame["t"] <= end)] if len(frame) else frame
    out: dict[str, float | int | None] = {"window_s": end - start, "samples": len(inside)}
    metrics = [c for c in frame.columns if c not in NOT_METRICS and pd.api.types.is_numeric_dtype(frame[c])]
    values = inside[metrics].astype("float64")  # each column's own readings: NaN left out, none read None
    figures = {stat: values.mean() if q is None else values.quantile(q) for stat, q in STATS}  # one pass a stat
    for column in metrics:
        for stat, _ in STATS:
            value = figures[stat][column]
            out[f"{column}_{stat}"] = None if pd.isna(value) else float(value)
    out.update(window_energy(frame, start, end))
    return out


def window_energy(frame: pd.DataFrame, start: float, end: float) -> dict[str, float | int | None]:
    """energy_j, energy_power_integral_j, avg_power_w, sampled_s and energy_counter_restarts for the window."""
    out: dict[str, float | int | None] = {"energy_j": None, "energy_power_integral_j": None, "avg_power_w": None,
                                           "sampled_s": None, "energy_counter_restarts": None}
    power, energy = _series(frame, "power_w"), _series(frame, "energy_mj")
    base = energy or power
    if base is None:
        return out
    a, b = max(start, base[0][0]), min(end, base[0][-1])
    if not b > a:
        return out
    out["sampled_s"] = b - a
    if power is not None:
        out["energy_power_integral_j"] = power_integral_j(*power, max(a, power[0][0]), min(b, power[0][-1]))
    if energy is not None:
        cumulative, restarts = counter_energy_j(*energy, power)
        out["energy_j"] = float(np.interp(b, energy[0], cumulative) - np.interp(a, energy[0], cumulative))
        out["energy_counter_restarts"] = restarts
    best = out["energy_j"] if out["energy_j"] is not None else out["energy_power_integral_j"]
    out["avg_power_w"] = None if best is None else best / (b - a)
    return out


def counter_energy_j(t: np.ndarray, energy_mj: np.ndarray,
                     power: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, int]:
    """Energy in J since the first sample, at each sample, from the counter; and how often the counter went back.

    An interval where the counter decreased (driver reload, wrap) gets the power integral over it instead
    (zero if there are no power readings).
    """
    steps = np.diff(energy_mj) / 1000.0
    back = steps < 0
    if back.any():
        steps[back] = [power_integral_j(*power, t[i], t[i + 1]) if power else 0.0 for i in np.flatnonzero(back)]
    return np.concatenate([[0.0], np.cumsum(steps)]), int(back.sum())


def power_integral_j(t: np.ndarray, power_w: np.ndarray, a: float, b: float) -> float:
    """Power integrated from `a` to `b` (trapezoids, linear interpolation at the edges)."""
    inner = t[(t > a) & (t < b)]
    if not b > a:
        return 0.0
    grid = np.concatenate([[a], inner, [b]])
    values = np.interp(grid, t, power_w)
    return float(np.sum(np.diff(grid) * (values[1:] + values[:-1]) / 2))


def _series(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(t, values) of a column's non-missing rows, or None if it has fewer than two."""
    if column not in frame.columns:
        return None
    rows = frame[["t", column]].dropna()
    return (rows["t"].to_numpy(float), rows[column].to_numpy(float)) if len(rows) >= 2 else None
