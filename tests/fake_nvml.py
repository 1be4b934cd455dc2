"""A stand-in for `pynvml` with its names, for monitor tests on machines without a GPU.

Configurable: which functions are unsupported, a GPU that is lost after some time, an energy counter that wraps,
GPM present or absent (and per-metric support), MIG GPU instances, compute processes. Energy is power integrated
over wall-clock time, so tests can compare the counter with the power readings.

    >>> fake = FakeNvml(power_w=300.0, unsupported={"nvmlDeviceGetTemperature"})
    >>> with nvml.use_backend(fake):                                    # doctest: +SKIP
    ...     Monitor(tmp_path).start().stop()
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterable

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
_STRINGS = {NVML_ERROR_UNINITIALIZED: "Uninitialized", NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
            NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_NOT_FOUND: "Not Found",
            NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded", NVML_ERROR_GPU_IS_LOST: "GPU is lost",
            NVML_ERROR_RESET_REQUIRED: "GPU requires restart"}


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _STRINGS.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class FakeProcess:
    pid: int
    used_mb: float
    sm_util: int = 50
    gpu_instance_id: int | None = None


@dataclass
class _Handle:
    gpu: int
    gpu_instance_id: int | None = None  # set on MIG device handles


class _GpmSample:
    def __init__(self) -> None:
        self.t: float | None = None
        self.gpu_instance_id: int | None = None
        self.freed = False


class _Metrics:
    """Like pynvml.c_nvmlGpmMetricsGet_t: version, numMetrics, sample1, sample2, metrics[]."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=NVML_SUCCESS, value=0.0) for _ in range(64)]


GPM_VALUES = {1: 97.0, 2: 80.0, 3: 40.0, 5: 20.0, 10: 45.0, 11: 0.0, 12: 12.0, 13: 3.0, 20: 150.0, 21: 900.0}


class FakeNvml:
    """One fake GPU (index 0) whose behaviour the test sets; attribute names are pynvml's."""

    __name__ = "fake_nvml"
    NVMLError = NVMLError
    NVML_SUCCESS = NVML_SUCCESS
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    NVML_ERROR_GPU_IS_LOST = NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_RESET_REQUIRED = NVML_ERROR_RESET_REQUIRED
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1
    NVML_GPM_METRIC_SM_UTIL = 2
    NVML_GPM_METRIC_SM_OCCUPANCY = 3
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10
    NVML_GPM_METRIC_FP64_UTIL = 11
    NVML_GPM_METRIC_FP32_UTIL = 12
    NVML_GPM_METRIC_FP16_UTIL = 13
    NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
    NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
    c_nvmlGpmMetricsGet_t = _Metrics

    def __init__(self, power_w: float = 300.0, unsupported: Iterable[str] = (), gpm: bool = True,
                 gpm_unsupported_metrics: Iterable[int] = (), energy_start_mj: int = 5_000_000,
                 energy_wrap_mj: int | None = None, processes: Iterable[FakeProcess] = (),
                 gpu_instances: Iterable[int] = (), driver_loaded: bool = True, gpus: int = 1):
        self.power_w = power_w
        self.unsupported = set(unsupported)
        self.gpm = gpm
        self.gpm_unsupported_metrics = set(gpm_unsupported_metrics)
        self.energy_wrap_mj = energy_wrap_mj
        self.processes = list(processes)
        self.gpu_instances = list(gpu_instances)
        self.driver_loaded = driver_loaded
        self.gpus = gpus
        self.lost_at: float | None = None
        self.calls: dict[str, int] = {}
        self.gpm_samples: list[_GpmSample] = []
        self.initialised = 0
        self._t0 = time.time()
        self._energy_start_mj = energy_start_mj

    # -- test controls
    def lose_gpu(self) -> None:
        """From now on every device call fails with NVML_ERROR_GPU_IS_LOST, as when a GPU falls off the bus."""
        self.lost_at = time.time()

    def energy_mj(self) -> int:
        energy = self._energy_start_mj + int(self.power_w * (time.time() - self._t0) * 1000)
        return energy % self.energy_wrap_mj if self.energy_wrap_mj else energy

    # -- plumbing
    def _device(self, name: str, handle: Any = None) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if self.lost_at is not None:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        if name in self.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    # -- pynvml API
    def nvmlInit(self) -> None:
        if not self.driver_loaded:
            raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetCount(self) -> int:
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        if not 0 <= index < self.gpus:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetName(self, h: _Handle) -> str:
        self._device("nvmlDeviceGetName")
        return "NVIDIA H100 80GB HBM3 (fake)"

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> Any:
        self._device("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=97, memory=41)

    def nvmlDeviceGetMemoryInfo(self, h: _Handle) -> Any:
        self._device("nvmlDeviceGetMemoryInfo")
        used = sum(p.used_mb for p in self.processes) * 2**20 + 500 * 2**20
        return SimpleNamespace(used=int(used), total=81559 * 2**20, free=0)

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        self._device("nvmlDeviceGetPowerUsage")
        return int(self.power_w * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: _Handle) -> int:
        self._device("nvmlDeviceGetTotalEnergyConsumption")
        return self.energy_mj()

    def nvmlDeviceGetClockInfo(self, h: _Handle, clock: int) -> int:
        self._device("nvmlDeviceGetClockInfo")
        return 1980 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        self._device("nvmlDeviceGetTemperature")
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: _Handle) -> int:
        self._device("nvmlDeviceGetCurrentClocksEventReasons")
        return 0

    def nvmlDeviceGetMigMode(self, h: _Handle) -> list[int]:
        self._device("nvmlDeviceGetMigMode")
        return [1, 1] if self.gpu_instances else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:
        self._device("nvmlDeviceGetMaxMigDeviceCount")
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, index: int) -> _Handle:
        self._device("nvmlDeviceGetMigDeviceHandleByIndex")
        if index >= len(self.gpu_instances):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return _Handle(h.gpu, self.gpu_instances[index])

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:
        self._device("nvmlDeviceGetGpuInstanceId")
        return h.gpu_instance_id

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[Any]:
        self._device("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p.pid, usedGpuMemory=int(p.used_mb * 2**20),
                                gpuInstanceId=p.gpu_instance_id, computeInstanceId=0)
                for p in self.processes if p.gpu_instance_id == h.gpu_instance_id]

    def nvmlDeviceGetProcessUtilization(self, h: _Handle, last_seen_us: int) -> list[Any]:
        self._device("nvmlDeviceGetProcessUtilization")
        if self.gpu_instances:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not self.processes:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        now_us = int(time.time() * 1e6)
        return [SimpleNamespace(pid=p.pid, timeStamp=now_us, smUtil=p.sm_util, memUtil=p.sm_util // 2,
                                encUtil=0, decUtil=0) for p in self.processes]

    def nvmlGpmQueryDeviceSupport(self, h: _Handle) -> Any:
        self._device("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(version=1, isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self) -> _GpmSample:
        sample = _GpmSample()
        self.gpm_samples.append(sample)
        return sample

    def nvmlGpmSampleFree(self, sample: _GpmSample) -> None:
        self._device("nvmlGpmSampleFree")
        sample.freed = True

    def nvmlGpmSampleGet(self, h: _Handle, sample: _GpmSample) -> _GpmSample:
        self._device("nvmlGpmSampleGet")
        sample.t, sample.gpu_instance_id = time.time(), None
        return sample

    def nvmlGpmMigSampleGet(self, h: _Handle, gpu_instance_id: int, sample: _GpmSample) -> _GpmSample:
        self._device("nvmlGpmMigSampleGet")
        if gpu_instance_id not in self.gpu_instances:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        sample.t, sample.gpu_instance_id = time.time(), gpu_instance_id
        return sample

    def nvmlGpmMetricsGet(self, query: _Metrics) -> _Metrics:
        self._device("nvmlGpmMetricsGet")
        if query.version != self.NVML_GPM_METRICS_GET_VERSION or query.sample1 is query.sample2:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if query.sample1.t is None or query.sample2.t is None or query.sample2.t <= query.sample1.t:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        scale = 0.5 if query.sample2.gpu_instance_id is not None else 1.0  # a MIG instance sees part of the work
        for metric in query.metrics[:query.numMetrics]:
            if metric.metricId in self.gpm_unsupported_metrics:
                metric.nvmlReturn, metric.value = NVML_ERROR_NOT_SUPPORTED, 0.0
            else:
                metric.nvmlReturn, metric.value = NVML_SUCCESS, GPM_VALUES[metric.metricId] * scale
        return query
