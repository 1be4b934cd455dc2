"""Measurement windows for your own code (in the manner of Zeus): time and GPU energy between two points.

Built on the monitor's sampler: a background thread reads the GPU's power and energy counter, and each window
edge takes one more sample at once, so windows shorter than the interval are cut exactly. Without a GPU, time
is still measured and `reason` says why energy is missing.

    >>> meter = EnergyMeter(gpu=0)                                    # doctest: +SKIP
    >>> meter.begin_window("epoch")                                   # doctest: +SKIP
    >>> train_one_epoch()                                             # doctest: +SKIP
    >>> meter.end_window("epoch")                                     # doctest: +SKIP
    Measurement(gpu=0, time_s=41.2, energy_j=16583.0, avg_power_w=402.5, reason=None)
    >>> with measure(gpu=0) as m:                                     # doctest: +SKIP
    ...     train_one_epoch()
    >>> m.energy_j                                                    # doctest: +SKIP
    16583.0
"""

from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, fields
from typing import Any, Iterator

from colloc_kit import events
from colloc_kit.errors import BadInput, NvmlUnavailable
from colloc_kit.gpu import nvml
from colloc_kit.monitor.gpu_source import DeviceSource, device_handle
from colloc_kit.monitor.sampler import Sampler, SourceLost
from colloc_kit.monitor.store import MemoryStore
from colloc_kit.monitor.summary import window_energy

__all__ = ["EnergyMeter", "Measurement", "measure", "sync_cuda"]


@dataclass
class Measurement:
    """One window: its duration, the GPU's energy and average power (None with a `reason` where unknown)."""

    gpu: int | None
    time_s: float | None = None
    energy_j: float | None = None
    avg_power_w: float | None = None
    reason: str | None = None


class EnergyMeter:
    """Named, possibly overlapping windows over GPU `gpu` (None: time only); close() (or `with`) ends sampling."""

    def __init__(self, gpu: int | None = 0, interval_s: float = 0.1):
        self.gpu = gpu
        self.reason: str | None = None
        self._open: dict[str, float] = {}
        self._nvml = ExitStack()
        self._sampler: Sampler | None = None
        if gpu is None:
            self.reason = "no GPU was asked for (gpu=None)"
            return
        try:
            lib = self._nvml.enter_context(nvml.session())
            self._source = DeviceSource(lib, gpu, device_handle(lib, gpu))
        except (NvmlUnavailable, SourceLost) as exc:
            self._nvml.close()
            self.reason = str(exc)
            return
        except BaseException:
            self._nvml.close()
            raise
        if {"energy_mj", "power_w"} <= self._source.absent.keys():
            self.reason = f"NVML gives neither energy nor power here: {self._source.absent['energy_mj']}"
        self._store = MemoryStore({self._source.series: self._source.schema})
        self._sampler = Sampler([self._source], interval_s, self._store, flush_every_s=3600.0)
        self._sampler.start()

    def __enter__(self) -> "EnergyMeter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Open a window; `sync_execution` first waits for the CUDA work already queued (see `sync_cuda`)."""
        if name in self._open:
            raise BadInput(f"a window named {name!r} is already open; end it first or use another name")
        if sync_execution:
            sync_cuda()
        self._open[name] = self._sampler.sample_now() if self._sampler else events.now()

    def end_window(self, name: str, sync_execution: bool = True) -> Measurement:
        """Close a window; `sync_execution` first waits for the CUDA work queued in it, so the window measures the
        work, not its launch (CUDA kernels run asynchronously)."""
        if name not in self._open:
            raise BadInput(f"no open window named {name!r}; open ones: {sorted(self._open) or 'none'}")
        if sync_execution:
            sync_cuda()
        start = self._open.pop(name)
        if self._sampler is None:
            return Measurement(self.gpu, time_s=events.now() - start, reason=self.reason)
        end = self._sampler.sample_now()
        self._sampler.flush()
        summary = window_energy(self._store.frame(self._source.series), start, end)
        if not self._open:  # nothing older is needed: keep only the last sample
            self._store.keep_last(self._source.series)
        return Measurement(self.gpu, time_s=end - start, reason=self._energy_reason(summary),
                           energy_j=summary["energy_j"] if summary["energy_j"] is not None
                           else summary["energy_power_integral_j"], avg_power_w=summary["avg_power_w"])

    def close(self) -> None:
        """Stop the background sampler, if one runs, and end the NVML session."""
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self._nvml.close()

    def _energy_reason(self, summary: dict) -> str | None:
        lost = self._sampler.lost.get(self._source.series) if self._sampler else None
        if lost:
            return f"{lost['reason']} (at t={lost['t']:.3f}); energy covers {summary['sampled_s'] or 0:.3f} s"
        if summary["energy_j"] is None and summary["energy_power_integral_j"] is not None:
            return f"no energy counter ({self._source.absent.get('energy_mj')}): energy is power integrated"
        return self.reason


def sync_cuda() -> None:
    """Wait for the work queued on torch's current CUDA device, where this process uses torch with CUDA (as Zeus's
    `sync_execution`); nothing otherwise, and never the first CUDA call of a process."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextmanager
def measure(gpu: int | None = 0, interval_s: float = 0.1) -> Iterator[Measurement]:
    """Measure the block: the yielded Measurement is filled in when the block ends."""
    result = Measurement(gpu)
    with EnergyMeter(gpu, interval_s) as meter:
        meter.begin_window("measure")
        try:
            yield result
        finally:
            done = meter.end_window("measure")
            for f in fields(done):
                setattr(result, f.name, getattr(done, f.name))
