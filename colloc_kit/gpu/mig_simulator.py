"""A simulated NVML for MIG: pynvml-shaped functions over the simulated hardware of `mig_state`. The kit code that
drives a real GPU drives this one unchanged.

This module only translates: pynvml's own constants, error classes and ctypes structures (imported from
nvidia-ml-py) in and out, opaque handles (pointers to a structure holding a key, here: `mig_handles`) to the state's
objects. Its GPU-instance and compute-instance functions are `mig_instance_calls`'s (`InstanceCalls`, which it holds).
The rules (placements, capacity, what is refused and why) are `mig_state`'s: current and pending MIG mode
(enabling needs an idle GPU and, with `needs_reset`, a GPU reset that the simulator, like the kit, never performs);
GPU-instance creation at a placement in memory slices (INVALID_ARGUMENT for a start the profile does not allow,
INSUFFICIENT_RESOURCES for overlapping memory slices, spent compute slices or the profile's instance limit);
compute instances; destruction refused while something is inside (IN_USE); NO_PERMISSION without privilege;
NOT_SUPPORTED on a GPU without MIG. UUIDs and device names say "simulated".

    >>> from colloc_kit.gpu import nvml
    >>> with simulated("H100-80GB") as sim, nvml.session() as lib:
    ...     h = lib.nvmlDeviceGetHandleByIndex(0)
    ...     lib.nvmlDeviceGetName(h), lib.nvmlDeviceGetMigMode(h)
    ('NVIDIA H100 80GB HBM3 (simulated)', [0, 0])

Knobs for tests: `needs_reset`, `privileged`, `mig_capable`, `add_process(...)`, `fail_creation(k, code)`.
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator

import pynvml
from pynvml import (  # pynvml's own constants, error class and structures: those the facade uses itself
    NVML_DEVICE_MIG_DISABLE,
    NVML_DEVICE_MIG_ENABLE,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_UNINITIALIZED,
    NVML_ERROR_UNKNOWN,
    NVMLError,
)

from colloc_kit.gpu import mig_handles, nvml
from colloc_kit.gpu.mig_catalogue import GpuModel
from colloc_kit.gpu.mig_handles import HandleTable, struct_c_nvmlDevice_t
from colloc_kit.gpu.mig_instance_calls import InstanceCalls
from colloc_kit.gpu.mig_state import SimulatedHost

__all__ = ["SimulatedNvml", "simulated", "simulated_gpu"]


class SimulatedNvml(InstanceCalls):
    """A stand-in for the `pynvml` module with simulated MIG-capable GPUs; install with `nvml.use_backend(sim)`.

    The hardware is `host` (a `mig_state.SimulatedHost`); `calls` lists the mutating calls made, in order.

    >>> sim = SimulatedNvml("A30", gpus=2)
    >>> sim.nvmlInit(); sim.nvmlDeviceGetCount(), sim.gpus[1].model.name
    (2, 'A30')
    """

    def __init__(self, model: str | GpuModel = "H100-80GB", gpus: int = 1, *, mig_enabled: bool = False,
                 needs_reset: bool = False, privileged: bool = True, mig_capable: bool = True):
        self.host = SimulatedHost(model, gpus, mig_enabled=mig_enabled, needs_reset=needs_reset,
                                  privileged=privileged, mig_capable=mig_capable)
        self.model = self.host.model
        self.gpus = self.host.gpus
        self.calls: list[str] = []  # names of the mutating calls made, in order (tests read it)
        self._init_count = 0
        self._handles = HandleTable(need_init=self._need_init)

    # -- knobs ----------------------------------------------------------------------------------------------------
    @property
    def needs_reset(self) -> bool:
        """Whether a MIG mode change waits for a GPU reset (`reset_gpu`); settable."""
        return self.host.needs_reset

    @needs_reset.setter
    def needs_reset(self, value: bool) -> None:
        """Set whether a MIG mode change waits for a GPU reset."""
        self.host.needs_reset = value

    @property
    def privileged(self) -> bool:
        """Whether this process may change MIG; settable."""
        return self.host.privileged

    @privileged.setter
    def privileged(self, value: bool) -> None:
        """Set whether this process may change MIG."""
        self.host.privileged = value

    def add_process(self, pid: int, device_uuid: str | None = None, gpu: int = 0, used_mib: int = 500) -> None:
        """Process `pid` computes on the GPU (or on the MIG device `device_uuid`) until it exits, as on a real GPU."""
        self.gpus[gpu].add_process(pid, device_uuid, used_mib)

    def remove_process(self, pid: int, gpu: int = 0) -> None:
        """Process `pid` no longer computes on the GPU."""
        self.gpus[gpu].remove_process(pid)

    def fail_creation(self, k: int, code: int = NVML_ERROR_UNKNOWN) -> None:
        """Make the k-th creation from now (GPU or compute instance, counting from 1) fail with NVML error `code`."""
        self.host.fail_creation(k, code)

    def snapshot(self, gpu: int = 0) -> dict[str, Any]:
        """The GPU's MIG state in plain values: mode, pending mode, instances with placements and compute instances."""
        return self.gpus[gpu].snapshot()

    def reset_gpu(self, gpu: int = 0) -> None:
        """What an administrator's GPU reset does: the pending mode becomes current, instances are gone."""
        self.gpus[gpu].reset()

    def mig_config_access(self) -> bool:
        """Whether this process may change MIG (root or /proc/driver/nvidia/capabilities/mig/config, on a real GPU)."""
        return self.host.privileged

    # -- init ----------------------------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        """Start a session (counted: each needs its `nvmlShutdown`)."""
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        """End a session; UNINITIALIZED without one."""
        self._need_init()
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """'simulated'."""
        self._need_init()
        return "simulated"

    # -- devices -------------------------------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        """The number of GPUs."""
        self._need_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int):
        """The handle of GPU `index`; INVALID_ARGUMENT if there is none."""
        self._need_init()
        if not 0 <= int(index) < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self._handles.handle(struct_c_nvmlDevice_t, self.gpus[int(index)])

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes):
        """The handle of the GPU or MIG device with `uuid`; NOT_FOUND if none."""
        self._need_init()
        found = self.host.find(uuid.decode() if isinstance(uuid, bytes) else uuid)
        if found is None:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return self._handles.handle(struct_c_nvmlDevice_t, found)

    def nvmlDeviceGetName(self, handle) -> str:
        """The GPU's name, or the MIG device's ('... MIG 1g.5gb (simulated)')."""
        gpu, mig = self._handles.device(handle)
        return gpu.device_name(mig)

    def nvmlDeviceGetUUID(self, handle) -> str:
        """The UUID of the GPU (GPU-simulated-...) or MIG device (MIG-simulated-...)."""
        gpu, mig = self._handles.device(handle)
        return mig.uuid if mig else gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        """Total, used (by the processes on it) and free bytes of the GPU or MIG device."""
        gpu, mig = self._handles.device(handle)
        total, used = gpu.memory_bytes(mig)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle) -> list:
        """The processes computing on the GPU or MIG device, with their memory and MIG instance ids (None off MIG)."""
        gpu, mig = self._handles.device(handle)
        found = []
        for p in gpu.running(mig):
            ci = gpu.mig_device(p.device_uuid)
            found.append(SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_bytes,
                                         gpuInstanceId=ci.gpu_instance.id if ci else None,
                                         computeInstanceId=ci.id if ci else None))
        return found

    # -- MIG mode ------------------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle) -> list[int]:
        """[current, pending] MIG mode; NOT_SUPPORTED on a GPU without MIG."""
        gpu = self._handles.parent(handle)
        gpu.require_mig_capable()
        return [_mig_mode(gpu.mig_enabled), _mig_mode(gpu.mig_pending)]

    def nvmlDeviceSetMigMode(self, handle, mode: int) -> int:
        """Returns the activation status: NVML_SUCCESS, or (mode left pending) IN_USE / RESET_REQUIRED."""
        gpu = self._handles.parent(handle)
        if mode not in (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        status = gpu.set_mig_mode(mode == NVML_DEVICE_MIG_ENABLE)
        self.calls.append(f"nvmlDeviceSetMigMode({mode})")
        return status

    # -- MIG devices ---------------------------------------------------------------------------------------------
    def nvmlDeviceGetMaxMigDeviceCount(self, handle) -> int:
        """The most MIG devices the GPU can have: one per compute slice."""
        return self._handles.parent(handle).model.compute_slices

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index: int):
        """The handle of MIG device `index` (by GPU-instance id, then compute-instance id); NOT_FOUND if none."""
        devices = self._handles.parent(handle).mig_devices()
        if not 0 <= index < len(devices):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return self._handles.handle(struct_c_nvmlDevice_t, devices[index])

    def nvmlDeviceIsMigDeviceHandle(self, handle) -> int:
        """1 for a MIG device's handle, 0 for a GPU's."""
        return int(self._handles.device(handle)[1] is not None)

    def nvmlDeviceGetGpuInstanceId(self, handle) -> int:
        """The GPU-instance id of a MIG device; INVALID_ARGUMENT for a GPU."""
        return self._handles.mig(handle).gpu_instance.id

    def nvmlDeviceGetComputeInstanceId(self, handle) -> int:
        """The compute-instance id of a MIG device; INVALID_ARGUMENT for a GPU."""
        return self._handles.mig(handle).id

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        """The handle of the GPU a MIG device is on; INVALID_ARGUMENT for a GPU."""
        return self._handles.handle(struct_c_nvmlDevice_t, self._handles.mig(handle).gpu_instance.gpu)

    # -- sessions ------------------------------------------------------------------------------------------------------
    def _need_init(self) -> None:
        if self._init_count <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)



# pynvml's module-level names, reachable as attributes like `pynvml.NVML_DEVICE_MIG_ENABLE`: its own constants and
# error classes (NVMLError_InUse, ...), its structures, and the simulator's handle types
for _name, _value in [*vars(pynvml).items(), *vars(mig_handles).items()]:
    if _name.startswith(("NVML_", "NVMLError", "c_nvml", "struct_c_nvml")):
        setattr(SimulatedNvml, _name, _value)


def simulated_gpu(model: str | GpuModel = "H100-80GB", **knobs: Any) -> SimulatedNvml:
    """A simulated NVML with one MIG-capable GPU of `model` (MIG disabled); install it with `nvml.use_backend`,
    or use `simulated(...)`. Knobs: needs_reset, privileged, mig_capable, mig_enabled, gpus.

    >>> simulated_gpu("A100-40GB", mig_enabled=True).snapshot()
    {'mode': 1, 'pending': 1, 'instances': []}
    """
    return SimulatedNvml(model, **knobs)


@contextmanager
def simulated(model: str | GpuModel = "H100-80GB", **knobs: Any) -> Iterator[SimulatedNvml]:
    """Every kit module uses a simulated GPU of `model` for the block (the MIG notebook without a MIG GPU).

    >>> from colloc_kit.modes import make_mode
    >>> from colloc_kit.spec import ModeSpec
    >>> with simulated("A100-40GB") as sim:
    ...     with make_mode(ModeSpec("mig", {"layout": "4g,2g,1g"}), workdir="/tmp", gpu=0, device="cuda") as mode:
    ...         [s.info["placement"] for s in mode.slots(3)]
    ['0:4', '4:2', '6:1']
    """
    with nvml.use_backend(simulated_gpu(model, **knobs)) as sim:
        yield sim


def _mig_mode(enabled: bool) -> int:
    return NVML_DEVICE_MIG_ENABLE if enabled else NVML_DEVICE_MIG_DISABLE
