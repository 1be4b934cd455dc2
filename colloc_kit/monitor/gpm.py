"""GPM (GPU Performance Monitoring, Hopper and newer): DCGM-like profiling metrics between two counter samples.

NVML computes each metric from two samples taken at least 100 ms apart. A `GpmCounter` owns two sample buffers
and one query struct, allocated once: each read fills the older buffer, computes against the newer, and swaps.
Reads sooner than MIN_INTERVAL_S after the last one give None for every metric (at a 20 ms monitor interval,
about every fifth row has GPM values).

    >>> counter, absent = GpmCounter.create(lib, lambda sample: lib.nvmlGpmSampleGet(handle, sample))  # doctest: +SKIP
    >>> dict(zip(counter.columns, counter.read()))                                                     # doctest: +SKIP
    {'sm_util_pct': 92.1, 'sm_occupancy_pct': 47.9, 'tensor_util_pct': 18.5, ...}
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import pyarrow as pa

from colloc_kit.gpu import nvml
from colloc_kit.monitor.gpu_source import probe

__all__ = ["GPM_COLUMNS", "GPM_METRICS", "GpmCounter", "MIN_INTERVAL_S", "MigGpmSource", "gpm_unsupported"]

MIN_INTERVAL_S = 0.1  # NVML: the two samples of a GPM query must be more than 100 ms apart

# (column, pynvml metric id name); DCGM equivalents: SM active, SM occupancy, tensor active, DRAM active
GPM_METRICS = (
    ("sm_util_pct", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy_pct", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor_util_pct", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_bw_util_pct", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
    ("fp16_util_pct", "NVML_GPM_METRIC_FP16_UTIL"),
    ("fp32_util_pct", "NVML_GPM_METRIC_FP32_UTIL"),
    ("fp64_util_pct", "NVML_GPM_METRIC_FP64_UTIL"),
    ("graphics_util_pct", "NVML_GPM_METRIC_GRAPHICS_UTIL"),
    ("pcie_tx_mb_per_s", "NVML_GPM_METRIC_PCIE_TX_PER_SEC"),
    ("pcie_rx_mb_per_s", "NVML_GPM_METRIC_PCIE_RX_PER_SEC"),
)
GPM_COLUMNS = tuple(column for column, _ in GPM_METRICS)


def gpm_unsupported(lib: Any, handle: Any) -> str | None:
    """Why GPM cannot be used on this device, or None if it can."""
    support, reason = probe(lib, lib.nvmlGpmQueryDeviceSupport, handle)
    if reason is not None:
        return f"GPM support query failed: {reason}"
    if not support.isSupportedDevice:
        return "GPM is not supported on this GPU (NVML's GPM metrics need Hopper or newer)"
    return None


class GpmCounter:
    """GPM metrics of one target (a GPU, or a MIG GPU instance); `columns` are those the target supports."""

    def __init__(self, lib: Any, take: Callable[[Any], Any]):
        self.lib, self.take = lib, take
        self.samples = [lib.nvmlGpmSampleAlloc(), lib.nvmlGpmSampleAlloc()]
        query = lib.c_nvmlGpmMetricsGet_t()
        query.version = lib.NVML_GPM_METRICS_GET_VERSION
        query.numMetrics = len(GPM_METRICS)
        for i, (_, id_name) in enumerate(GPM_METRICS):
            query.metrics[i].metricId = getattr(lib, id_name)
        self.query = query
        self.indices = list(range(len(GPM_METRICS)))
        self.columns = GPM_COLUMNS
        self.absent: dict[str, str] = {}
        self._ref_t = -float("inf")

    @classmethod
    def create(cls, lib: Any, take: Callable[[Any], Any]) -> tuple["GpmCounter | None", dict[str, str]]:
        """A counter, probed with one real query (this waits MIN_INTERVAL_S), and the columns left out with why."""
        counter, reason = probe(lib, cls, lib, take)
        if reason is not None:
            return None, {c: f"GPM sample buffers could not be set up: {reason}" for c in GPM_COLUMNS}
        _, reason = probe(lib, counter.take, counter.samples[0])
        if reason is None:
            counter._ref_t = time.monotonic()
            time.sleep(MIN_INTERVAL_S + 0.01)
            _, reason = probe(lib, counter._compute)
        if reason is not None:
            counter.close()
            return None, {c: f"GPM query failed: {reason}" for c in GPM_COLUMNS}
        metrics = counter.query.metrics
        for i, column in enumerate(GPM_COLUMNS):
            if metrics[i].nvmlReturn != lib.NVML_SUCCESS:
                counter.absent[column] = f"NVML gave no {column} here: {lib.NVMLError(metrics[i].nvmlReturn)}"
        counter.indices = [i for i, c in enumerate(GPM_COLUMNS) if c not in counter.absent]
        counter.columns = tuple(GPM_COLUMNS[i] for i in counter.indices)
        return counter, counter.absent

    def fields(self) -> list[pa.Field]:
        """The pyarrow fields of the metrics this GPU gives (float64 each)."""
        return [pa.field(c, pa.float64()) for c in self.columns]

    def read(self) -> tuple:
        """Metrics since the previous read, or Nones when that was less than MIN_INTERVAL_S ago."""
        if time.monotonic() - self._ref_t < MIN_INTERVAL_S:
            return (None,) * len(self.indices)
        self._compute()
        metrics, ok = self.query.metrics, self.lib.NVML_SUCCESS
        return tuple(metrics[i].value if metrics[i].nvmlReturn == ok else None for i in self.indices)

    def _compute(self) -> None:
        now = time.monotonic()
        self.take(self.samples[1])
        self.query.sample1, self.query.sample2 = self.samples
        self.lib.nvmlGpmMetricsGet(self.query)
        self.samples.reverse()  # the newest sample is the reference of the next query
        self._ref_t = now

    def close(self) -> None:
        """Free the GPM samples (once the GPU is lost there is nothing to free)."""
        for sample in self.samples:
            try:
                self.lib.nvmlGpmSampleFree(sample)
            except Exception as exc:  # e.g. the GPU is lost: nothing more to free
                if not nvml.is_nvml_error(exc):
                    raise


class MigGpmSource:
    """The `samples_mig` series: GPM metrics of each MIG GPU instance (`nvmlGpmMigSampleGet`)."""

    series = "samples_mig"

    def __init__(self, lib: Any, index: int, handle: Any, gpu_instance_ids: list[int]):
        self.lib, self.index = lib, index
        self.notes: list[str] = []
        self.counters: dict[int, GpmCounter] = {}
        self.absent: dict[str, str] = {}
        for gi in gpu_instance_ids:
            counter, absent = GpmCounter.create(lib, functools.partial(lib.nvmlGpmMigSampleGet, handle, gi))
            if counter is None:
                self.notes.append(f"GPU instance {gi}: {next(iter(absent.values()))}")
            else:
                self.counters[gi] = counter
                self.absent = self.absent or absent
        first = next(iter(self.counters.values()), None)
        if first is not None:
            for counter in self.counters.values():  # one column set: a metric another instance lacks reads None
                counter.indices, counter.columns = first.indices, first.columns
        columns = first.fields() if first else []
        self.schema = pa.schema([pa.field("t", pa.float64()), pa.field("gpu", pa.int64()),
                                 pa.field("gpu_instance_id", pa.int64()), *columns])

    def read(self, t: float) -> list[tuple]:
        """One row per GPU instance: its GPM metrics at `t` (Nones where a read failed)."""
        rows = []
        for gi, counter in self.counters.items():
            values, reason = probe(self.lib, counter.read)
            rows.append((t, self.index, gi, *(values if reason is None else (None,) * len(counter.columns))))
        return rows

    def close(self) -> None:
        """Free every instance's GPM samples."""
        for counter in self.counters.values():
            counter.close()

