"""The simulated NVML's handles, as in pynvml: pointers to ctypes structures, here each carrying a key into the
`HandleTable` that leads back to the object of `mig_state` (a GPU, a MIG device, a GPU or compute instance). The
two info structures that hold handles are declared here too, with pynvml's field names.

    >>> from colloc_kit.gpu.mig_state import SimulatedHost
    >>> gpu = SimulatedHost("A30", 1).gpus[0]
    >>> table = HandleTable(need_init=lambda: None)
    >>> handle = table.handle(struct_c_nvmlDevice_t, gpu)
    >>> table.parent(handle) is gpu, table.handle(struct_c_nvmlDevice_t, gpu).contents.key == handle.contents.key
    (True, True)
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any, Callable

from pynvml import (
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_SUCCESS,
    NVMLError,
    c_nvmlComputeInstancePlacement_t,
    c_nvmlGpuInstancePlacement_t,
)

from colloc_kit.gpu.mig_instances import ComputeInstance, GpuInstance
from colloc_kit.gpu.mig_state import SimulatedGpu

__all__ = ["HandleTable", "c_nvmlComputeInstanceInfo_t", "c_nvmlComputeInstance_t", "c_nvmlDevice_t",
           "c_nvmlGpuInstanceInfo_t", "c_nvmlGpuInstance_t", "deref", "fill", "struct_c_nvmlComputeInstance_t",
           "struct_c_nvmlDevice_t", "struct_c_nvmlGpuInstance_t"]


class struct_c_nvmlDevice_t(ctypes.Structure):
    """What a device handle (a GPU or a MIG device) points to: a key into the simulator."""

    _fields_ = [("key", ctypes.c_uint)]


class struct_c_nvmlGpuInstance_t(ctypes.Structure):
    """What a GPU-instance handle points to: a key into the simulator."""

    _fields_ = [("key", ctypes.c_uint)]


class struct_c_nvmlComputeInstance_t(ctypes.Structure):
    """What a compute-instance handle points to: a key into the simulator."""

    _fields_ = [("key", ctypes.c_uint)]


c_nvmlDevice_t = ctypes.POINTER(struct_c_nvmlDevice_t)
c_nvmlGpuInstance_t = ctypes.POINTER(struct_c_nvmlGpuInstance_t)
c_nvmlComputeInstance_t = ctypes.POINTER(struct_c_nvmlComputeInstance_t)


class c_nvmlGpuInstanceInfo_t(ctypes.Structure):
    """pynvml's GPU-instance info, over the simulator's handles."""

    _fields_ = [("device", c_nvmlDevice_t), ("id", ctypes.c_uint), ("profileId", ctypes.c_uint),
                ("placement", c_nvmlGpuInstancePlacement_t)]


class c_nvmlComputeInstanceInfo_t(ctypes.Structure):
    """pynvml's compute-instance info, over the simulator's handles."""

    _fields_ = [("device", c_nvmlDevice_t), ("gpuInstance", c_nvmlGpuInstance_t), ("id", ctypes.c_uint),
                ("profileId", ctypes.c_uint), ("placement", c_nvmlComputeInstancePlacement_t)]


class HandleTable:
    """One structure per object, pointed to by every handle of it, and the way back from a handle to its object;
    INVALID_ARGUMENT for a handle of another kind or of an object that is gone. `need_init` runs before each look-up
    (it raises UNINITIALIZED outside an NVML session)."""

    def __init__(self, need_init: Callable[[], None]) -> None:
        self._need_init = need_init
        self._keys = itertools.count(1)
        self._structs: dict[tuple[type, int], Any] = {}  # (structure type, id of object) -> structure
        self._objects: dict[tuple[type, int], Any] = {}  # (structure type, key) -> object of mig_state

    def handle(self, struct_type: type, obj: Any) -> Any:
        """A pointer to the one structure of `struct_type` that stands for `obj` (a GPU, MIG device or instance)."""
        struct = self._structs.get((struct_type, id(obj)))
        if struct is None:
            struct = self._structs[struct_type, id(obj)] = struct_type(next(self._keys))
            self._objects[struct_type, struct.key] = obj
        return ctypes.pointer(struct)

    def lookup(self, handle: Any, struct_type: type[Any]) -> Any:
        """The object behind a handle of `struct_type`; INVALID_ARGUMENT for anything else or a stale handle."""
        self._need_init()
        try:
            struct: Any = handle.contents
        except (AttributeError, ValueError):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT) from None
        found = self._objects.get((struct_type, struct.key)) if isinstance(struct, struct_type) else None
        if found is None or not found.exists:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return found

    def device(self, handle: Any) -> tuple[SimulatedGpu, ComputeInstance | None]:
        """The GPU behind a device handle, and the MIG device (a compute instance) when it is one's."""
        found = self.lookup(handle, struct_c_nvmlDevice_t)
        return (found, None) if isinstance(found, SimulatedGpu) else (found.gpu_instance.gpu, found)

    def parent(self, handle: Any) -> SimulatedGpu:
        """The GPU behind a GPU's handle; INVALID_ARGUMENT for a MIG device's."""
        gpu, mig = self.device(handle)
        if mig is not None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    def mig(self, handle: Any) -> ComputeInstance:
        """The MIG device behind a MIG device's handle; INVALID_ARGUMENT for a GPU's."""
        _, mig = self.device(handle)
        if mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return mig

    def gi(self, handle: Any) -> GpuInstance:
        """The GPU instance behind a GPU-instance handle."""
        return self.lookup(handle, struct_c_nvmlGpuInstance_t)

    def ci(self, handle: Any) -> ComputeInstance:
        """The compute instance behind a compute-instance handle."""
        return self.lookup(handle, struct_c_nvmlComputeInstance_t)


def deref(ref: Any) -> Any:
    """The object behind a ctypes pointer or byref(), or the object itself."""
    if hasattr(ref, "contents"):
        return ref.contents
    return getattr(ref, "_obj", ref)


def fill(array: Any, count: Any, handles: list) -> int:
    """Fill a caller's handle array as NVML does: INSUFFICIENT_SIZE if it is too small."""
    if len(handles) > count.value:
        count.value = len(handles)
        raise NVMLError(NVML_ERROR_INSUFFICIENT_SIZE)
    for i, h in enumerate(handles):
        array[i] = h
    count.value = len(handles)
    return NVML_SUCCESS
