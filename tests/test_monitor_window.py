"""Measurement windows for users' own code, against the stand-in NVML and without a GPU."""

import re
import sys
import time
import types

import pytest
from fake_nvml import FakeNvml

from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.monitor import EnergyMeter, measure, window


def test_measure_gives_time_and_energy_of_the_block():
    with nvml.use_backend(FakeNvml(power_w=200.0)):
        with measure(gpu=0, interval_s=0.02) as m:
            assert m.energy_j is None  # filled in when the block ends
            time.sleep(0.25)
    assert m.time_s == pytest.approx(0.25, abs=0.05)
    assert m.energy_j == pytest.approx(200.0 * m.time_s, rel=0.02)
    assert m.avg_power_w == pytest.approx(200.0, rel=0.02) and m.reason is None


def test_named_windows_may_overlap_and_be_shorter_than_the_interval():
    with nvml.use_backend(FakeNvml(power_w=100.0)), EnergyMeter(gpu=0, interval_s=1.0) as meter:
        meter.begin_window("outer")
        meter.begin_window("inner")
        time.sleep(0.05)
        inner = meter.end_window("inner")
        time.sleep(0.05)
        outer = meter.end_window("outer")
    assert inner.energy_j == pytest.approx(100.0 * inner.time_s, rel=0.05)
    assert outer.energy_j == pytest.approx(100.0 * outer.time_s, rel=0.05) and outer.time_s > inner.time_s


def test_window_names_are_checked():
    with EnergyMeter(gpu=None) as meter:
        meter.begin_window("a")
        with pytest.raises(BadInput, match="already open"):
            meter.begin_window("a")
        with pytest.raises(BadInput, match="no open window named 'b'; open ones: \\['a'\\]"):
            meter.end_window("b")


@pytest.mark.parametrize("fake, gpu, reason", [(FakeNvml(driver_loaded=False), 0, "Driver Not Loaded"),
                                               (FakeNvml(), None, "gpu=None")])
def test_without_a_gpu_time_is_measured_and_energy_is_none_with_the_reason(fake, gpu, reason):
    with nvml.use_backend(fake), measure(gpu=gpu) as m:
        time.sleep(0.05)
    assert m.time_s >= 0.05 and m.energy_j is None and m.avg_power_w is None and reason in m.reason


def test_a_gpu_lost_during_a_window_says_so():
    fake = FakeNvml(power_w=100.0)
    with nvml.use_backend(fake), measure(gpu=0, interval_s=0.02) as m:
        started = time.perf_counter()
        time.sleep(0.1)
        fake.lose_gpu()
        lost_after = time.perf_counter() - started
        time.sleep(0.1)
    # the energy is the samples' until the loss: 100 W over the seconds it says it covers, none of them after it
    # (how many samples a loaded host's sampler took before the loss varies: 0.06-0.1 s of 0.1)
    covered = float(re.search(r"energy covers ([0-9.]+) s", m.reason)[1])
    assert "GPU is lost" in m.reason and 0.0 < covered <= lost_after + 0.02
    assert m.energy_j == pytest.approx(100.0 * covered, rel=0.05)


def test_windows_wait_for_queued_cuda_work(monkeypatch):
    """A window around asynchronous CUDA work measures the work: each edge synchronises torch's device first."""
    calls = []
    cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 synchronize=lambda: calls.append("sync"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))  # stand-in torch: records syncs
    meter = window.EnergyMeter(gpu=None)
    meter.begin_window("w")
    meter.end_window("w")
    assert calls == ["sync", "sync"]
    meter.begin_window("async", sync_execution=False)
    meter.end_window("async", sync_execution=False)
    assert calls == ["sync", "sync"]
