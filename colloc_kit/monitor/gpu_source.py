"""Device fields of one GPU through NVML: utilization, memory, power, energy counter, clocks, temperature.

Each field is probed once at start; a field NVML does not give on this GPU is left out of the table and its reason
kept in `absent`. Row layout: `t`, `gpu`, then the fields that were supported, in FIELDS order.

    >>> with nvml.session() as lib:                                  # doctest: +SKIP
    ...     source = DeviceSource(lib, 0, device_handle(lib, 0))
    ...     source.read(events.now())
    [(1763640000.1, 0, 97.0, 41.0, 3277.0, 81559.0, 402.7, 1234567890.0, 1980.0, 2619.0, 61.0, 0)]
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.monitor.sampler import SourceLost

__all__ = ["DeviceSource", "FIELDS", "MB", "call", "device_handle", "is_lost", "mig_devices", "probe"]

MB = 2**20


def _utilization(lib: Any, h: Any) -> tuple:
    u = lib.nvmlDeviceGetUtilizationRates(h)
    return float(u.gpu), float(u.memory)


def _memory(lib: Any, h: Any) -> tuple:
    m = lib.nvmlDeviceGetMemoryInfo(h)
    return m.used / MB, m.total / MB


def _power(lib: Any, h: Any) -> tuple:
    return (lib.nvmlDeviceGetPowerUsage(h) / 1000.0,)  # mW; on recent GPUs a one-second average


def _energy(lib: Any, h: Any) -> tuple:
    return (float(lib.nvmlDeviceGetTotalEnergyConsumption(h)),)  # mJ since the driver loaded


def _sm_clock(lib: Any, h: Any) -> tuple:
    return (float(lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_SM)),)


def _mem_clock(lib: Any, h: Any) -> tuple:
    return (float(lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_MEM)),)


def _temperature(lib: Any, h: Any) -> tuple:
    return (float(lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU)),)


def _clock_event_reasons(lib: Any, h: Any) -> tuple:
    # "throttle reasons" were renamed "clocks event reasons" in NVML 12.2; same bitmask (NVML_CLOCKS_EVENT_REASON_*)
    fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or lib.nvmlDeviceGetCurrentClocksThrottleReasons
    return (int(fn(h)),)


# (columns, pyarrow type, reader(lib, handle) -> one value per column)
FIELDS: tuple[tuple[tuple[str, ...], pa.DataType, Callable[[Any, Any], tuple]], ...] = (
    (("gpu_util_pct", "mem_util_pct"), pa.float64(), _utilization),
    (("mem_used_mb", "mem_total_mb"), pa.float64(), _memory),
    (("power_w",), pa.float64(), _power),
    (("energy_mj",), pa.float64(), _energy),
    (("sm_clock_mhz",), pa.float64(), _sm_clock),
    (("mem_clock_mhz",), pa.float64(), _mem_clock),
    (("temperature_c",), pa.float64(), _temperature),
    (("clock_event_reasons",), pa.int64(), _clock_event_reasons),
)


def is_lost(lib: Any, exc: BaseException) -> bool:
    """True where NVML says the GPU is gone (fell off the bus, needs a reset): nothing more will be read from it."""
    code = getattr(exc, "value", None)
    return code is not None and code in (getattr(lib, "NVML_ERROR_GPU_IS_LOST", 15),
                                         getattr(lib, "NVML_ERROR_RESET_REQUIRED", 16))


def call(lib: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, with NVML's "GPU is lost" turned into SourceLost (other errors pass through)."""
    try:
        return fn(*args)
    except Exception as exc:
        if is_lost(lib, exc):
            raise SourceLost(f"GPU lost: {nvml.describe_error(exc)}") from exc
        raise


def probe(lib: Any, fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """(value, None), or (None, reason) where NVML refused; raises SourceLost where the GPU is gone."""
    reading = nvml.optional(call, lib, fn, *args)  # SourceLost is no NVML error: it passes through
    return reading.value, reading.reason


def device_handle(lib: Any, index: int) -> Any:
    """NVML's handle of GPU `index`; BadInput naming the GPUs there are if it does not exist."""
    count = call(lib, lib.nvmlDeviceGetCount)
    if not (isinstance(index, int) and 0 <= index < count):
        raise BadInput(f"GPU {index!r} does not exist: NVML sees {count} GPU(s), indices 0 to {count - 1}; "
                       "pass one of those, or gpu=None to measure without a GPU")
    return call(lib, lib.nvmlDeviceGetHandleByIndex, index)


def mig_devices(lib: Any, handle: Any) -> list[tuple[int, Any]]:
    """(GPU instance id, MIG device handle) for each MIG device of the GPU; empty where MIG is off or unknown."""
    mode, reason = probe(lib, lib.nvmlDeviceGetMigMode, handle)
    if reason is not None or mode[0] != lib.NVML_DEVICE_MIG_ENABLE:
        return []
    found = []
    for i in range(call(lib, lib.nvmlDeviceGetMaxMigDeviceCount, handle)):
        mig, reason = probe(lib, lib.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
        if reason is None:  # NOT_FOUND for unused indices
            found.append((call(lib, lib.nvmlDeviceGetGpuInstanceId, mig), mig))
    return found


class DeviceSource:
    """The `samples_gpu` series of GPU `index`: device fields, then the GPM metrics of `gpm` (a `GpmCounter`)."""

    series = "samples_gpu"

    def __init__(self, lib: Any, index: int, handle: Any, gpm: Any = None, gpm_absent: dict[str, str] | None = None):
        self.lib, self.index, self.handle, self.gpm = lib, index, handle, gpm
        self.absent: dict[str, str] = dict(gpm_absent or {})
        self.notes: list[str] = []
        self.missed: dict[str, int] = {}  # first column of a field -> samples where it failed
        self._readers = []
        columns = [pa.field("t", pa.float64()), pa.field("gpu", pa.int64())]
        for names, type_, reader in FIELDS:
            _, reason = probe(lib, reader, lib, handle)
            if reason is None:
                self._readers.append((reader, names))
                columns += [pa.field(n, type_) for n in names]
            else:
                self.absent.update({n: reason for n in names})
        if gpm is not None:
            self._readers.append((lambda lib, h: gpm.read(), gpm.columns))
            columns += gpm.fields()
        self.schema = pa.schema(columns)

    def read(self, t: float) -> list[tuple]:
        """One row of the GPU's fields at `t`; a field that fails this time reads None and is counted."""
        row: list[Any] = [t, self.index]
        for reader, names in self._readers:
            values, reason = probe(self.lib, reader, self.lib, self.handle)
            if reason is not None:  # a passing failure of a supported field: this sample lacks it
                values = (None,) * len(names)
                self.missed[names[0]] = self.missed.get(names[0], 0) + 1
            row += values
        return [tuple(row)]

    def close(self) -> None:
        """Free the GPM samples, if GPM was sampled."""
        if self.gpm is not None:
            self.gpm.close()
