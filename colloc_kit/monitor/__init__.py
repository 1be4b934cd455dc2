"""Monitoring during runs: GPU (NVML, GPM) and host series on the jobs' clock, window summaries, energy windows.

    run_monitor  `Monitor`: the sampling threads of a run, started and stopped with it
    sampler      one sampling loop at an interval
    gpu_source   the GPU's NVML readings; gpm: its GPM metrics (Hopper)
    processes    per-process GPU memory of the jobs
    host         the host's CPU and memory
    store        samples written to Parquet parts and read back (`read_samples`)
    summary      a window's summary of the samples (`summarize`)
    window       `measure` and `EnergyMeter`: measure your own code

    >>> from colloc_kit.monitor import Monitor, read_samples, summarize, measure
    >>> with Monitor(run_dir / "monitor", gpu=0, job_pids=lambda: pids):      # doctest: +SKIP
    ...     run_jobs()
    >>> samples = read_samples(run_dir / "monitor")                           # doctest: +SKIP
    >>> summarize(samples.gpu, start, end)["sm_occupancy_pct_mean"]           # doctest: +SKIP
"""

from colloc_kit.monitor.run_monitor import Monitor
from colloc_kit.monitor.store import Samples, read_samples
from colloc_kit.monitor.summary import summarize
from colloc_kit.monitor.window import EnergyMeter, Measurement, measure

__all__ = ["EnergyMeter", "Measurement", "Monitor", "Samples", "measure", "read_samples", "summarize"]
