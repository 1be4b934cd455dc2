"""The monitor against the real NVML on a GPU (skipped without one): device fields, GPM on Hopper, energy."""

import time

import pytest

from colloc_kit.monitor import Monitor, measure, read_samples, summarize

pytestmark = pytest.mark.gpu


def busy(seconds: float) -> None:
    import torch  # noqa: PLC0415 - heavy: GPU tests only

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def test_real_nvml_series_while_the_gpu_works(tmp_path):
    with Monitor(tmp_path, gpu=0, interval_s=0.15):
        time.sleep(1.5)  # NVML's power reading is a ~1 s average: settle before and after the burst, so the
        busy(4.0)        # power integral sees the whole burst as the energy counter does
        time.sleep(1.5)
    samples = read_samples(tmp_path)
    gpu, info = samples.gpu, samples.info
    assert info["errors"] == [] and info["lost"] == {}, info
    assert {"power_w", "energy_mj", "gpu_util_pct", "mem_used_mb"} <= set(gpu.columns), info["series"]
    assert gpu["energy_mj"].is_monotonic_increasing and gpu["power_w"].max() > 0
    if "sm_util_pct" in gpu.columns:  # GPM: Hopper or newer
        gpm = gpu.dropna(subset=["sm_util_pct"])
        assert len(gpm) >= 10 and gpm["sm_util_pct"].between(0, 100).all()
        assert gpm["sm_util_pct"].max() > 50 and (gpm["sm_occupancy_pct"] <= gpm["sm_util_pct"] + 0.5).all()
    busy_rows = samples.process[samples.process["gpu_mem_used_mb"] > 0]
    assert len(busy_rows) > 0  # this test process itself holds GPU memory
    s = summarize(gpu, gpu["t"].iloc[0], gpu["t"].iloc[-1])
    assert s["energy_j"] == pytest.approx(s["energy_power_integral_j"], rel=0.15)


def test_measure_on_the_real_gpu():
    with measure(gpu=0) as m:
        busy(1.0)
    assert m.reason is None and m.energy_j > 0 and 10 < m.avg_power_w < 1500
