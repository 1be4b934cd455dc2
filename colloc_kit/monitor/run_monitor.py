"""The run monitor: samples one GPU (NVML, GPM) and the host in the background and writes Parquet series.

Samples are stamped with the kit clock (`events.now()`), the clock of the jobs' events, so windows cut from the
events (e.g. the steady state of all jobs) select samples directly. Errors never reach the run: they are recorded
in monitor.json, with every column left out and why. See `store` for the files written.

    >>> with Monitor(run_dir / "monitor", gpu=0, job_pids=lambda: {worker.pid: "j0-resnet50"}):   # doctest: +SKIP
    ...     run_the_jobs()
    >>> read_samples(run_dir / "monitor").gpu[["t", "sm_util_pct", "power_w"]] # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from colloc_kit import events
from colloc_kit.errors import BadInput, NvmlUnavailable
from colloc_kit.gpu import nvml
from colloc_kit.monitor.gpm import GPM_COLUMNS, MIN_INTERVAL_S, GpmCounter, MigGpmSource, gpm_unsupported
from colloc_kit.monitor.gpu_source import DeviceSource, device_handle, mig_devices, probe
from colloc_kit.monitor.host import HostJobSource, HostSource, JobProcesses
from colloc_kit.monitor.processes import GpuProcessSource, processes_unsupported
from colloc_kit.monitor.sampler import Sampler, Source, SourceLost
from colloc_kit.monitor.store import ParquetStore, write_info

__all__ = ["GPU_SERIES", "Monitor"]

GPU_SERIES = ("samples_gpu", "samples_mig", "samples_process")


class Monitor:
    """Background sampling of GPU `gpu` (None: host only) every `interval_s` into `out_dir`; also a context manager."""

    def __init__(self, out_dir: str | Path, gpu: int | None = 0, interval_s: float = 0.15,
                 job_pids: Callable[[], Mapping[int, str]] = dict, flush_every_s: float = 10.0,
                 on_gpu_sample: Callable[[dict], None] | None = None):
        if not (isinstance(interval_s, (int, float)) and interval_s > 0):
            raise BadInput(f"monitor interval must be a positive number of seconds, got {interval_s!r}; "
                           "the default is 0.15")
        self.out_dir, self.gpu, self.interval_s = Path(out_dir), gpu, float(interval_s)
        self.flush_every_s = flush_every_s
        self.on_gpu_sample = on_gpu_sample  # each GPU sample as {column: value}, as it is read (a live view)
        self.jobs = JobProcesses(job_pids)
        self.series_absent: dict[str, str] = {}
        self.device: dict[str, Any] = {}
        self.sources: list[Source] = []
        self.sampler: Sampler | None = None
        self._nvml = ExitStack()
        self._store: ParquetStore | None = None
        self._started_at: float | None = None
        self._stopped = False

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "Monitor":
        """Open the run's sources and store and start sampling; once per Monitor. Returns self."""
        if self.sampler is not None:
            raise RuntimeError("this Monitor was already started; make a new one per run")
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self.sources = [HostSource(), HostJobSource(self.jobs), *self._gpu_sources()]
            self._store = ParquetStore(self.out_dir, {s.series: s.schema for s in self.sources})
            self.sampler = Sampler(self.sources, self.interval_s, self._store, self.flush_every_s,
                                   listener=self._hear if self.on_gpu_sample else None)
            self._started_at = events.now()
            write_info(self.out_dir, self.info("running"))
        except BaseException:
            for source in self.sources:
                with contextlib.suppress(Exception):
                    source.close()
            self._nvml.close()
            self.sampler = None
            raise
        self.sampler.start()
        return self

    def _hear(self, series: str, rows: list[tuple]) -> None:
        """Pass the device series' rows on to `on_gpu_sample` as dicts."""
        hear = self.on_gpu_sample
        assert hear is not None  # start() listens only when it is set
        if series == DeviceSource.series:
            names = next(s.schema.names for s in self.sources if s.series == series)
            for row in rows:
                hear(dict(zip(names, row)))

    def stop(self) -> None:
        """Take a last sample, write every series and monitor.json; never raises (it runs in the launcher's finally)."""
        if self.sampler is None or self._stopped:
            return
        self._stopped = True
        assert self._store is not None  # start() opened it before the sampler
        try:
            self.sampler.stop()
            self._store.close()
        except Exception as exc:  # the parts files stay readable
            self.sampler.record("store (close)", exc, events.now())
        finally:
            self._nvml.close()
        try:
            write_info(self.out_dir, self.info("complete"))
        except Exception as exc:
            warnings.warn(f"colloc-kit monitor could not write {self.out_dir / 'monitor.json'}: {exc}", stacklevel=1)

    def info(self, status: str) -> dict[str, Any]:
        """What monitor.json holds: settings, the device, columns recorded and left out (with why), errors, notes."""
        sampler = self.sampler
        notes = [note for s in self.sources for note in s.notes]
        notes += [n for s in self.sources if isinstance(s, GpuProcessSource) and (n := s.unmatched_note())]
        return {
            "status": status, "clock": "time.time() seconds, the clock of the jobs' events",
            "interval_s": self.interval_s, "gpm_min_interval_s": MIN_INTERVAL_S, "flush_every_s": self.flush_every_s,
            "started_at": self._started_at, "stopped_at": events.now() if status == "complete" else None,
            "gpu": self.gpu, "device": self.device,
            "series": {s.series: {"columns": s.schema.names, "absent": s.absent} for s in self.sources},
            "series_absent": self.series_absent,
            "lost": sampler.lost if sampler else {},
            "missed": {s.series: missed for s in self.sources if (missed := getattr(s, "missed", None))},
            "ticks": sampler.ticks if sampler else 0, "late_ticks": sampler.late_ticks if sampler else 0,
            "tick_ms_mean": 1000 * sampler.busy_s / sampler.ticks if sampler and sampler.ticks else None,
            "errors": sampler.error_list() if sampler else [],
            "notes": notes,
        }

    def _gpu_sources(self) -> list[Source]:
        """The GPU sources, or none with the reason in `series_absent` (no GPU asked for, NVML missing, GPU lost)."""
        if self.gpu is None:
            return self._no_gpu("no GPU was asked for (gpu=None)")
        try:
            lib = self._nvml.enter_context(nvml.session())
        except NvmlUnavailable as exc:
            return self._no_gpu(str(exc))
        try:
            return self._device_sources(lib, self.gpu, device_handle(lib, self.gpu))
        except SourceLost as exc:
            return self._no_gpu(str(exc))

    def _device_sources(self, lib: Any, gpu: int, handle: Any) -> list[Source]:
        name, _ = probe(lib, lib.nvmlDeviceGetName, handle)
        driver, _ = probe(lib, lib.nvmlSystemGetDriverVersion)
        self.device = {"name": nvml.text(name) if name is not None else None,
                       "driver": nvml.text(driver) if driver is not None else None,
                       "backend": getattr(lib, "__name__", type(lib).__name__)}
        migs = mig_devices(lib, handle)
        gpm_reason = gpm_unsupported(lib, handle)
        if gpm_reason is None:
            counter, gpm_absent = GpmCounter.create(lib, lambda sample: lib.nvmlGpmSampleGet(handle, sample))
        else:
            counter, gpm_absent = None, {c: gpm_reason for c in GPM_COLUMNS}
        sources: list[Source] = [DeviceSource(lib, gpu, handle, counter, gpm_absent)]

        if not migs:
            self.series_absent["samples_mig"] = "MIG is off on this GPU (no MIG devices)"
        elif gpm_reason is not None:
            self.series_absent["samples_mig"] = gpm_reason
        else:
            mig = MigGpmSource(lib, gpu, handle, sorted({gi for gi, _ in migs}))
            if mig.counters:
                sources.append(mig)
            else:
                self.series_absent["samples_mig"] = "; ".join(mig.notes)

        targets: Sequence[tuple[int | None, Any]] = migs if migs else [(None, handle)]
        reason = processes_unsupported(lib, targets[0][1])
        if reason is None:
            sources.append(GpuProcessSource(lib, gpu, targets, self.jobs))
        else:
            self.series_absent["samples_process"] = reason
        return sources

    def _no_gpu(self, reason: str) -> list[Source]:
        self.series_absent.update({series: reason for series in GPU_SERIES})
        return []
