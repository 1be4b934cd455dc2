"""Window summaries on synthetic samples (labelled so: made up here, not measured): stats and energy maths."""

import numpy as np
import pandas as pd
import pytest

from colloc_kit.monitor import summarize


def synthetic(power_w, dt=0.1, energy_start_mj=1_000_000.0, reset_at=None, gpm_every=1):
    """Samples every `dt` s of a GPU drawing `power_w` (a list, one value per interval), with an exact counter."""
    t = 1000.0 + dt * np.arange(len(power_w) + 1)
    p = np.array([power_w[0], *power_w], dtype=float)
    energy = energy_start_mj + np.concatenate([[0.0], np.cumsum(np.array(power_w) * dt * 1000)])
    if reset_at is not None:  # the driver reloaded: the counter starts again from zero
        energy[reset_at:] -= energy[reset_at - 1] + 5_000.0
    sm = np.where(np.arange(len(t)) % gpm_every == 0, np.linspace(0, 100, len(t)), np.nan)
    return pd.DataFrame({"t": t, "gpu": 0, "power_w": p, "energy_mj": energy, "sm_util_pct": sm})


def test_constant_power_gives_the_same_energy_both_ways_with_windows_cut_between_samples():
    frame = synthetic([250.0] * 100)
    s = summarize(frame, 1001.23, 1007.77)  # edges fall between samples
    assert s["window_s"] == pytest.approx(6.54) and s["sampled_s"] == pytest.approx(6.54)
    assert s["energy_j"] == pytest.approx(250.0 * 6.54)
    assert s["energy_power_integral_j"] == pytest.approx(250.0 * 6.54)
    assert s["avg_power_w"] == pytest.approx(250.0) and s["energy_counter_restarts"] == 0


def test_a_counter_reset_is_bridged_by_the_power_integral_of_that_interval():
    frame = synthetic([250.0] * 100, reset_at=40)
    assert (frame["energy_mj"].diff() < 0).sum() == 1
    s = summarize(frame, 1000.0, 1010.0)
    assert s["energy_counter_restarts"] == 1
    assert s["energy_j"] == pytest.approx(2500.0)


def test_a_window_beyond_the_samples_is_clipped_to_them():
    s = summarize(synthetic([200.0] * 10), 995.0, 1100.0)
    assert s["window_s"] == 105.0 and s["sampled_s"] == pytest.approx(1.0)
    assert s["energy_j"] == pytest.approx(200.0) and s["avg_power_w"] == pytest.approx(200.0)


def test_metric_statistics_skip_rows_without_a_value():
    frame = synthetic([200.0] * 100, gpm_every=5)
    s = summarize(frame, 1000.0, 1010.0)
    values = frame["sm_util_pct"].dropna()
    assert s["samples"] == 101
    assert s["sm_util_pct_mean"] == pytest.approx(values.mean())
    assert s["sm_util_pct_p50"] == pytest.approx(values.median())
    assert s["sm_util_pct_p95"] == pytest.approx(np.percentile(values, 95))
    assert s["power_w_mean"] == pytest.approx(200.0)
    assert "energy_mj_mean" not in s and "gpu_mean" not in s


def test_without_a_counter_energy_is_power_integrated():
    s = summarize(synthetic([150.0] * 20).drop(columns="energy_mj"), 1000.0, 1002.0)
    assert s["energy_j"] is None and s["energy_power_integral_j"] == pytest.approx(300.0)
    assert s["avg_power_w"] == pytest.approx(150.0)


def test_an_empty_series_gives_nones_and_a_reversed_window_is_refused():
    s = summarize(pd.DataFrame(columns=["t", "power_w", "energy_mj"]), 0.0, 1.0)
    assert s["samples"] == 0 and s["energy_j"] is None and s["avg_power_w"] is None
    with pytest.raises(ValueError, match="must end after it starts"):
        summarize(synthetic([100.0] * 3), 5.0, 5.0)
