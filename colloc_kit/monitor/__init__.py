"""Monitoring during runs: GPU (NVML, GPM) and host series on the jobs' clock, window summaries, energy windows.

    >>> from colloc_kit.monitor import Monitor, read_samples, summarize, measure
    >>> with Monitor(run_dir / "monitor", gpu=0, job_pids=lambda: pids):      # doctest: +SKIP
    ...     run_jobs()
    >>> samples = read_samples(run_dir / "monitor")                           # doctest: +SKIP
    >>> summarize(samples.gpu, start, end)["sm_occupancy_pct_mean"]           # doctest: +SKIP
"""

from .run_monitor import Monitor
from .store import Samples, read_samples
from .summary import summarize
from .window import EnergyMeter, Measurement, measure

__all__ = ["EnergyMeter", "Measurement", "Monitor", "Samples", "measure", "read_samples", "summarize"]
