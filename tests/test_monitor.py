"""The run monitor against a stand-in NVML: series written, fields absent with reasons, lost GPU, no GPU, MIG."""

import json
import os
import subprocess
import sys
import time

import pytest
from fake_nvml import FakeNvml, FakeProcess

from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.monitor import Monitor, read_samples, summarize
from colloc_kit.monitor.gpm import GPM_COLUMNS

FAST = 0.02  # monitor interval in these tests, seconds


def run_monitor(tmp_path, fake, seconds=0.3, min_ticks=5, **kwargs):
    """Monitor for at least `seconds` and `min_ticks` samples (a loaded CI machine may starve the thread)."""
    with nvml.use_backend(fake):
        with Monitor(tmp_path, interval_s=FAST, **kwargs) as monitor:
            time.sleep(seconds)
            deadline = time.monotonic() + 10
            while monitor.sampler.ticks < min_ticks and time.monotonic() < deadline:
                time.sleep(0.01)
    return read_samples(tmp_path)


def test_device_gpm_process_and_host_series_are_written_and_mapped_to_jobs(tmp_path, sleeping_child):
    fake = FakeNvml(power_w=300.0, processes=[FakeProcess(sleeping_child.pid, 1200.0, sm_util=70),
                                              FakeProcess(1, 300.0, sm_util=5)])
    samples = run_monitor(tmp_path, fake, job_pids=lambda: {os.getpid(): "j0"})

    gpu = samples.gpu
    assert len(gpu) >= 5, samples.info
    assert gpu["t"].is_monotonic_increasing, gpu["t"].tolist()
    assert {"gpu_util_pct", "mem_used_mb", "power_w", "energy_mj", "sm_clock_mhz", "temperature_c",
            "clock_event_reasons", *GPM_COLUMNS} <= set(gpu.columns)
    assert gpu["power_w"].eq(300.0).all()
    assert gpu["energy_mj"].is_monotonic_increasing
    assert gpu["sm_util_pct"].dropna().eq(80.0).all() and gpu["sm_occupancy_pct"].notna().sum() >= 2

    by_pid = samples.process.groupby("pid").first()
    assert by_pid.loc[sleeping_child.pid, "job"] == "j0"  # a child of the job's worker pid counts as the job's
    assert by_pid.loc[sleeping_child.pid, "gpu_mem_used_mb"] == pytest.approx(1200.0)
    assert by_pid.loc[sleeping_child.pid, "sm_util_pct"] == 70.0
    assert samples.process.loc[samples.process["pid"] == 1, "job"].isna().all()  # a foreign process: no job

    host_job = samples.host_job
    assert set(host_job["job"]) == {"j0"} and host_job["processes"].max() >= 2
    assert samples.host["cpu_util_pct"].between(0, 100).all()
    assert {"cpu_steal_pct", "cpu_freq_mhz"} <= set(samples.host.columns)  # what can swing a lone job, recorded

    info = json.loads((tmp_path / "monitor.json").read_text())
    assert info["status"] == "complete" and info["errors"] == [] and info["device"]["backend"] == "fake_nvml"
    assert "MIG is off" in info["series_absent"]["samples_mig"]
    assert any("MPS" in note for note in info["notes"])
    assert not list(tmp_path.glob("*.parts"))  # merged on stop


def test_unsupported_fields_are_absent_with_reasons(tmp_path):
    fake = FakeNvml(unsupported={"nvmlDeviceGetTemperature", "nvmlDeviceGetTotalEnergyConsumption"},
                    gpm_unsupported_metrics={FakeNvml.NVML_GPM_METRIC_FP64_UTIL})
    samples = run_monitor(tmp_path, fake, seconds=0.15)

    for column in ("temperature_c", "energy_mj", "fp64_util_pct"):
        assert column not in samples.gpu.columns
        assert "Not Supported" in samples.info["series"]["samples_gpu"]["absent"][column]
    assert "power_w" in samples.gpu.columns and "sm_util_pct" in samples.gpu.columns
    summary = summarize(samples.gpu, samples.gpu["t"].iloc[0], samples.gpu["t"].iloc[-1])
    assert summary["energy_j"] is None and summary["energy_power_integral_j"] > 0


def test_without_gpm_the_gpm_columns_are_absent_with_the_reason(tmp_path):
    samples = run_monitor(tmp_path, FakeNvml(gpm=False), seconds=0.1)
    assert not set(GPM_COLUMNS) & set(samples.gpu.columns)
    assert "Hopper" in samples.info["series"]["samples_gpu"]["absent"]["sm_util_pct"]


def test_gpm_buffers_are_allocated_once_and_queries_keep_100_ms_apart(tmp_path):
    fake = FakeNvml()
    samples = run_monitor(tmp_path, fake, seconds=0.5)
    assert len(fake.gpm_samples) == 2 and all(s.freed for s in fake.gpm_samples)
    gpu = samples.gpu.assign(last_gpm_t=samples.gpu["t"].where(samples.gpu["sm_util_pct"].notna()).ffill())
    with_gpm, without = gpu[gpu["sm_util_pct"].notna()], gpu[gpu["sm_util_pct"].isna()]
    assert len(with_gpm) >= 3 and len(without) >= 3  # at 20 ms, GPM values on about every fifth row
    assert with_gpm["t"].diff().dropna().min() >= 0.095
    assert (without["t"] - without["last_gpm_t"]).dropna().max() < 0.13  # none skipped long after 100 ms passed


def test_a_gpu_lost_mid_run_stops_gpu_series_and_keeps_the_host_series(tmp_path):
    fake = FakeNvml(processes=[FakeProcess(1, 100.0)])
    with nvml.use_backend(fake):
        with Monitor(tmp_path, interval_s=FAST) as monitor:
            while monitor.sampler.ticks < 4:
                time.sleep(0.01)
            fake.lose_gpu()
            time.sleep(0.2)
    samples = read_samples(tmp_path)
    assert len(samples.gpu) >= 3 and samples.gpu["t"].max() <= fake.lost_at + 0.005
    assert samples.host["t"].max() > fake.lost_at + 0.1
    for series in ("samples_gpu", "samples_process"):
        assert "GPU is lost" in samples.info["lost"][series]["reason"]
    assert samples.info["errors"] == [] and samples.info["status"] == "complete"


def test_energy_counter_wrap_is_bridged_by_the_power_readings(tmp_path):
    fake = FakeNvml(power_w=300.0, energy_start_mj=900_000, energy_wrap_mj=1_000_000)  # wraps after 0.33 s
    samples = run_monitor(tmp_path, fake, seconds=0.6)
    assert (samples.gpu["energy_mj"].diff() < 0).sum() == 1
    t = samples.gpu["t"]
    summary = summarize(samples.gpu, t.iloc[0], t.iloc[-1])
    assert summary["energy_counter_restarts"] == 1
    assert summary["energy_j"] == pytest.approx(300.0 * (t.iloc[-1] - t.iloc[0]), rel=0.02)
    assert summary["energy_j"] == pytest.approx(summary["energy_power_integral_j"], rel=0.02)


@pytest.mark.parametrize("fake, gpu, reason", [(FakeNvml(driver_loaded=False), 0, "Driver Not Loaded"),
                                               (FakeNvml(), None, "gpu=None")])
def test_without_a_gpu_only_host_series_are_written_with_the_reason(tmp_path, fake, gpu, reason):
    samples = run_monitor(tmp_path, fake, seconds=0.1, gpu=gpu)
    assert len(samples.host) >= 2 and samples.gpu.empty and samples.process.empty
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["samples_host.parquet", "samples_host_job.parquet"]
    assert all(reason in samples.info["series_absent"][s] for s in ("samples_gpu", "samples_mig", "samples_process"))


def test_mig_instances_get_their_own_gpm_rows_and_processes_lack_utilization(tmp_path):
    fake = FakeNvml(gpu_instances=[1, 2], processes=[FakeProcess(1, 500.0, gpu_instance_id=2)])
    samples = run_monitor(tmp_path, fake, seconds=0.3)
    mig = samples.mig.dropna(subset=["sm_util_pct"])
    assert set(mig["gpu_instance_id"]) == {1, 2} and mig["sm_util_pct"].eq(40.0).all()
    assert set(samples.process["gpu_instance_id"]) == {2} and "sm_util_pct" in samples.process.columns
    assert samples.process["sm_util_pct"].isna().all()
    assert "MIG" in samples.info["series"]["samples_process"]["absent"]["sm_util_pct"]


def test_sampler_errors_are_recorded_not_raised(tmp_path):
    def broken_job_pids():
        raise RuntimeError("launcher table is broken")

    samples = run_monitor(tmp_path, FakeNvml(), seconds=0.1, job_pids=broken_job_pids)
    errors = {e["source"]: e for e in samples.info["errors"]}
    assert "launcher table is broken" in errors["samples_host_job"]["error"]
    assert errors["samples_host_job"]["count"] >= 2 and len(samples.gpu) >= 2


def test_samples_flushed_during_the_run_are_readable_before_stop(tmp_path):
    with nvml.use_backend(FakeNvml()):
        monitor = Monitor(tmp_path, interval_s=FAST, flush_every_s=0.05).start()
        try:
            time.sleep(0.3)
            during = read_samples(tmp_path)  # as after a crash: only part files exist
            assert list(tmp_path.glob("samples_gpu.parts/part-*.parquet")) and len(during.gpu) >= 3
            assert during.info["status"] == "running"
        finally:
            monitor.stop()
    after = read_samples(tmp_path)
    assert len(after.gpu) >= len(during.gpu) and after.info["status"] == "complete"


def test_a_run_that_raises_still_leaves_its_samples(tmp_path):
    with nvml.use_backend(FakeNvml()), pytest.raises(KeyboardInterrupt):
        with Monitor(tmp_path, interval_s=FAST):
            time.sleep(0.1)
            raise KeyboardInterrupt
    samples = read_samples(tmp_path)
    assert len(samples.gpu) >= 1 and len(samples.host) >= 1 and samples.info["status"] == "complete"


def test_a_gpu_index_that_does_not_exist_is_bad_input(tmp_path):
    fake = FakeNvml()
    with nvml.use_backend(fake), pytest.raises(BadInput, match="NVML sees 1 GPU"):
        Monitor(tmp_path, gpu=3).start()
    assert fake.initialised == 0  # NVML shut down again


def test_each_gpu_sample_reaches_a_live_listener_as_it_is_read(tmp_path):
    heard = []
    with nvml.use_backend(FakeNvml()):
        with Monitor(tmp_path, interval_s=FAST, on_gpu_sample=heard.append):
            time.sleep(0.3)
    stored = read_samples(tmp_path).gpu
    assert len(heard) == len(stored) >= 3  # every sample, not only the flushed ones
    assert {"t", "gpu_util_pct", "mem_used_mb", "power_w"} <= heard[0].keys()
    assert [s["t"] for s in heard] == list(stored["t"])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="two cores, Linux")
def test_a_jobs_processes_on_one_core_are_counted_as_one(tmp_path):
    """Session 28: a lone loader-bound job's images per core of its CPU varied 20-37 % on an idle host. Each sample
    says how many distinct cores the job's processes were last on: two processes held to core 0 are one core; one
    on core 0 and one on core 1 are two."""
    napping = [subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.005)"])
               for _ in range(2)]  # awake often, so each is soon on the core it is allowed
    job = {p.pid: "j0" for p in napping}
    try:
        for proc in napping:
            os.sched_setaffinity(proc.pid, {0})
        time.sleep(0.1)
        held = run_monitor(tmp_path / "held", FakeNvml(), job_pids=lambda: job).host_job
        os.sched_setaffinity(napping[1].pid, {1})
        time.sleep(0.1)
        apart = run_monitor(tmp_path / "apart", FakeNvml(), job_pids=lambda: job).host_job
    finally:
        for proc in napping:
            proc.kill()
            proc.wait()
    assert held["processes"].eq(2).all() and held["cores"].eq(1).all(), held
    assert apart["processes"].eq(2).all() and apart["cores"].iloc[-3:].eq(2).all(), apart
