"""A simulated NVML for MIG: pynvml's own constants, error classes and ctypes structures (imported from
nvidia-ml-py; only the opaque handles are the simulator's: a key into its state) over a state machine built from
the profile tables. The kit code that drives a real GPU drives this one unchanged.

Modelled: current and pending MIG mode (enabling needs an idle GPU and, with `needs_reset`, a GPU reset that the
simulator, like the kit, never performs); profile info and placements in memory slices; GPU-instance creation
at a placement (INVALID_ARGUMENT for a start the profile does not allow, INSUFFICIENT_RESOURCES for overlapping
memory slices, spent compute slices or the profile's instance limit); compute instances; destruction refused
while something is inside (IN_USE); MIG devices with MIG-simulated-<uuid> UUIDs (GPUs: GPU-simulated-<uuid>);
NO_PERMISSION without privilege;
NOT_SUPPORTED on a GPU without MIG. GPU-instance ids follow what A100s report (7g: 0, halves 1-2, quarters 3-6,
eighths 7-14); real code must read them back, never assume them. Device names say "(simulated)".

    >>> from colloc_kit.gpu import nvml
    >>> with simulated("H100-80GB") as sim, nvml.session() as lib:
    ...     h = lib.nvmlDeviceGetHandleByIndex(0)
    ...     lib.nvmlDeviceGetName(h), lib.nvmlDeviceGetMigMode(h)
    ('NVIDIA H100 80GB HBM3 (simulated)', [0, 0])

Knobs for tests: `needs_reset`, `privileged`, `mig_capable`, `add_process(...)`, `fail_creation(k, code)`.
"""

from __future__ import annotations

import ctypes
import itertools
import uuid as uuidlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Iterator

import pynvml
from pynvml import (  # pynvml's own constants, error class and structures: those the simulator uses itself
    NVML_DEVICE_MIG_DISABLE,
    NVML_DEVICE_MIG_ENABLE,
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_INVALID_STATE,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_ERROR_UNINITIALIZED,
    NVML_ERROR_UNKNOWN,
    NVML_GPU_INSTANCE_PROFILE_COUNT,
    NVML_SUCCESS,
    NVMLError,
    c_nvmlComputeInstancePlacement_t,
    c_nvmlComputeInstanceProfileInfo_v2_t,
    c_nvmlGpuInstancePlacement_t,
    c_nvmlGpuInstanceProfileInfo_v2_t,
)

from . import nvml
from .pids import alive
from .mig_catalogue import FULL_CI_PROFILE, GpuModel, Profile, gpu_model

# Three codes the simulator raises have no text in pynvml, which asks the driver for it (nvmlErrorString); the
# simulator stands in for the driver, so it gives the driver's strings, as a real GPU would.
for _code, _text in ((NVML_ERROR_IN_USE, "In use by another client"),
                     (NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient resources"),
                     (NVML_ERROR_INVALID_STATE, "Invalid state")):
    NVMLError._errcode_to_string.setdefault(_code, _text)


# Opaque handles, as in pynvml: pointers to structures. Here the structure carries a key into the simulator,
# so the two info structures that hold handles are declared here too (same field names as pynvml's).
class struct_c_nvmlDevice_t(ctypes.Structure):
    _fields_ = [("key", ctypes.c_uint)]


class struct_c_nvmlGpuInstance_t(ctypes.Structure):
    _fields_ = [("key", ctypes.c_uint)]


class struct_c_nvmlComputeInstance_t(ctypes.Structure):
    _fields_ = [("key", ctypes.c_uint)]


c_nvmlDevice_t = ctypes.POINTER(struct_c_nvmlDevice_t)
c_nvmlGpuInstance_t = ctypes.POINTER(struct_c_nvmlGpuInstance_t)
c_nvmlComputeInstance_t = ctypes.POINTER(struct_c_nvmlComputeInstance_t)


class c_nvmlGpuInstanceInfo_t(ctypes.Structure):
    _fields_ = [("device", c_nvmlDevice_t), ("id", ctypes.c_uint), ("profileId", ctypes.c_uint),
                ("placement", c_nvmlGpuInstancePlacement_t)]


class c_nvmlComputeInstanceInfo_t(ctypes.Structure):
    _fields_ = [("device", c_nvmlDevice_t), ("gpuInstance", c_nvmlGpuInstance_t), ("id", ctypes.c_uint),
                ("profileId", ctypes.c_uint), ("placement", c_nvmlComputeInstancePlacement_t)]


# -- the simulated hardware ---------------------------------------------------------------------------------------
@dataclass
class _ComputeInstance:
    key: int
    id: int
    profile: int  # NVML_COMPUTE_INSTANCE_PROFILE_* (its id equals the enum here, as on A100/H100)
    start: int
    size: int
    uuid: str
    handle_struct: Any = None
    mig_device_struct: Any = None


@dataclass
class _GpuInstance:
    key: int
    id: int
    profile: Profile
    start: int
    cis: dict[int, _ComputeInstance] = field(default_factory=dict)
    handle_struct: Any = None


@dataclass
class _Gpu:
    key: int
    index: int
    model: GpuModel
    uuid: str
    mig_capable: bool
    current: int
    pending: int
    gis: dict[int, _GpuInstance] = field(default_factory=dict)
    processes: list = field(default_factory=list)  # SimpleNamespace(pid, usedGpuMemory, device_uuid)
    handle_struct: Any = None

    @property
    def name(self) -> str:
        base = self.model.nvml_names[0] if self.model.nvml_names else f"NVIDIA {self.model.name}"
        return f"{base} (simulated)"


class SimulatedNvml:
    """A stand-in for the `pynvml` module with simulated MIG-capable GPUs; install with `nvml.use_backend(sim)`."""

    def __init__(self, model: str | GpuModel = "H100-80GB", gpus: int = 1, *, mig_enabled: bool = False,
                 needs_reset: bool = False, privileged: bool = True, mig_capable: bool = True):
        self.model = gpu_model(model)
        self.needs_reset = needs_reset
        self.privileged = privileged
        self._keys = itertools.count(1)
        self._creations = 0
        self._fail_at: dict[int, int] = {}
        self._init_count = 0
        self._objects: dict[int, Any] = {}
        self.calls: list[str] = []  # names of the mutating calls made, in order (tests read it)
        mode = NVML_DEVICE_MIG_ENABLE if mig_enabled else NVML_DEVICE_MIG_DISABLE
        self.gpus = []
        for index in range(gpus):
            gpu = _Gpu(self._key(), index, self.model, f"GPU-{_uuid(f'{self.model.name}/{index}')}", mig_capable,
                       mode, mode)
            gpu.handle_struct = struct_c_nvmlDevice_t(gpu.key)
            self._objects[gpu.key] = gpu
            self.gpus.append(gpu)

    # -- knobs ----------------------------------------------------------------------------------------------------
    def add_process(self, pid: int, device_uuid: str | None = None, gpu: int = 0, used_mib: int = 500) -> None:
        """Process `pid` computes on the GPU (or on the MIG device `device_uuid`) until it exits, as on a real GPU."""
        self.gpus[gpu].processes.append(
            SimpleNamespace(pid=pid, usedGpuMemory=used_mib * 2**20, device_uuid=device_uuid or self.gpus[gpu].uuid))

    def remove_process(self, pid: int, gpu: int = 0) -> None:
        self.gpus[gpu].processes = [p for p in self.gpus[gpu].processes if p.pid != pid]

    def fail_creation(self, k: int, code: int = NVML_ERROR_UNKNOWN) -> None:
        """Make the k-th creation from now (GPU or compute instance, counting from 1) fail with NVML error `code`."""
        self._fail_at[self._creations + k] = code

    def snapshot(self, gpu: int = 0) -> dict[str, Any]:
        """The GPU's MIG state in plain values: mode, pending mode, instances with placements and compute instances."""
        g = self.gpus[gpu]
        return {"mode": g.current, "pending": g.pending,
                "instances": sorted((gi.profile.name, gi.start, tuple(sorted(ci.profile for ci in gi.cis.values())))
                                    for gi in g.gis.values())}

    def reset_gpu(self, gpu: int = 0) -> None:
        """What an administrator's GPU reset does: the pending mode becomes current, instances are gone."""
        g = self.gpus[gpu]
        if self._processes(g):
            raise NVMLError(NVML_ERROR_IN_USE)
        g.current = g.pending
        for gi in list(g.gis.values()):
            self._forget_gi(g, gi)

    # -- init ----------------------------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        self._need_init()
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._need_init()
        return "simulated"

    # -- devices -------------------------------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._need_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int):
        self._need_init()
        if not 0 <= int(index) < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return ctypes.pointer(self.gpus[int(index)].handle_struct)

    def nvmlDeviceGetHandleByUUID(self, uuid: str):
        self._need_init()
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return ctypes.pointer(gpu.handle_struct)
            for gi in gpu.gis.values():
                for ci in gi.cis.values():
                    if ci.uuid == uuid:
                        return ctypes.pointer(ci.mig_device_struct)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetName(self, handle) -> str:
        gpu, mig = self._device(handle)
        if mig is None:
            return gpu.name
        gi = self._gi_of(gpu, mig)
        return gpu.name.replace(" (simulated)", f" MIG {gi.profile.name} (simulated)")

    def nvmlDeviceGetUUID(self, handle) -> str:
        gpu, mig = self._device(handle)
        return mig.uuid if mig else gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu, mig = self._device(handle)
        total = (self._gi_of(gpu, mig).profile.memory_mib if mig else gpu.model.total_memory_mib) * 2**20
        used = sum(p.usedGpuMemory for p in self._processes(gpu, mig))
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle) -> list:
        gpu, mig = self._device(handle)
        found = []
        for p in self._processes(gpu, mig):
            gi, ci = self._ids_of_uuid(gpu, p.device_uuid)
            found.append(SimpleNamespace(pid=p.pid, usedGpuMemory=p.usedGpuMemory, gpuInstanceId=gi,
                                         computeInstanceId=ci))
        return found

    # -- MIG mode ------------------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle) -> list[int]:
        gpu = self._parent(handle)
        if not gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return [gpu.current, gpu.pending]

    def nvmlDeviceSetMigMode(self, handle, mode: int) -> int:
        """Returns the activation status: NVML_SUCCESS, or (mode left pending) IN_USE / RESET_REQUIRED."""
        gpu = self._parent(handle)
        if not gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        self._need_privilege()
        if mode not in (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if mode == NVML_DEVICE_MIG_DISABLE and gpu.gis:
            raise NVMLError(NVML_ERROR_IN_USE)
        self.calls.append(f"nvmlDeviceSetMigMode({mode})")
        gpu.pending = mode
        if mode == gpu.current:
            return NVML_SUCCESS
        if self._processes(gpu):
            return NVML_ERROR_IN_USE
        if self.needs_reset:
            return NVML_ERROR_RESET_REQUIRED
        gpu.current = mode
        return NVML_SUCCESS

    # -- GPU instances -------------------------------------------------------------------------------------------
    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, profile: int, version: int = 2):
        gpu = self._parent(handle)
        p = self._profile_by_enum(gpu, profile)
        info = c_nvmlGpuInstanceProfileInfo_v2_t()
        info.version, info.id, info.sliceCount, info.instanceCount = 2, p.profile_id, p.compute_slices, p.max_instances
        info.multiprocessorCount, info.copyEngineCount, info.memorySizeMB = p.sm_count, p.compute_slices, p.memory_mib
        info.name = f"MIG {p.name}".encode()
        return info

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, handle, profile_id: int):
        gpu = self._parent(handle)
        return self.nvmlDeviceGetGpuInstanceProfileInfo(handle, self._profile_by_id(gpu, profile_id).nvml_profile)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle, profile_id: int, placements, count_ref) -> int:
        gpu = self._parent(handle)
        p = self._profile_by_id(gpu, profile_id)
        count = _deref(count_ref)
        if placements is None:
            count.value = len(p.placements)
            return NVML_SUCCESS
        if count.value < len(p.placements):
            raise NVMLError(NVML_ERROR_INSUFFICIENT_SIZE)
        for i, start in enumerate(p.placements):
            placements[i].start, placements[i].size = start, p.memory_slices
        count.value = len(p.placements)
        return NVML_SUCCESS

    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, handle, profile_id: int) -> int:
        gpu = self._parent(handle)
        self._need_mig(gpu)
        p = self._profile_by_id(gpu, profile_id)
        return sum(1 for start in p.placements if self._gi_fits(gpu, p, start) is None)

    def nvmlDeviceCreateGpuInstance(self, handle, profile_id: int):
        gpu = self._parent(handle)
        self._need_mig(gpu)
        p = self._profile_by_id(gpu, profile_id)
        start = next((s for s in p.placements if self._gi_fits(gpu, p, s) is None), None)
        if start is None:
            raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._create_gi(gpu, p, start)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle, profile_id: int, placement):
        gpu = self._parent(handle)
        self._need_mig(gpu)
        p = self._profile_by_id(gpu, profile_id)
        where = _deref(placement)
        if where.start not in p.placements or where.size != p.memory_slices:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self._create_gi(gpu, p, where.start)

    def nvmlGpuInstanceDestroy(self, gi_handle) -> int:
        gpu, gi = self._gi(gi_handle)
        self._need_privilege()
        if gi.cis:
            raise NVMLError(NVML_ERROR_IN_USE)
        self.calls.append(f"nvmlGpuInstanceDestroy({gi.profile.name}@{gi.start})")
        self._forget_gi(gpu, gi)
        return NVML_SUCCESS

    def nvmlDeviceGetGpuInstances(self, handle, profile_id: int, gi_array, count_ref) -> int:
        gpu = self._parent(handle)
        self._need_mig(gpu)
        self._profile_by_id(gpu, profile_id)
        found = [gi for gi in sorted(gpu.gis.values(), key=lambda g: g.id) if gi.profile.profile_id == profile_id]
        return _fill(gi_array, _deref(count_ref), [ctypes.pointer(gi.handle_struct) for gi in found])

    def nvmlDeviceGetGpuInstanceById(self, handle, gi_id: int):
        gpu = self._parent(handle)
        self._need_mig(gpu)
        if gi_id not in gpu.gis:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return ctypes.pointer(gpu.gis[gi_id].handle_struct)

    def nvmlGpuInstanceGetInfo(self, gi_handle):
        gpu, gi = self._gi(gi_handle)
        info = c_nvmlGpuInstanceInfo_t()
        info.device, info.id, info.profileId = ctypes.pointer(gpu.handle_struct), gi.id, gi.profile.profile_id
        info.placement.start, info.placement.size = gi.start, gi.profile.memory_slices
        return info

    # -- compute instances ---------------------------------------------------------------------------------------
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi_handle, profile: int, eng_profile: int, version: int = 2):
        gpu, gi = self._gi(gi_handle)
        slices = self._ci_slices(gi, profile)
        info = c_nvmlComputeInstanceProfileInfo_v2_t()
        info.version, info.id, info.sliceCount = 2, profile, slices
        info.instanceCount = gi.profile.compute_slices // slices
        info.multiprocessorCount = gi.profile.sm_count * slices // gi.profile.compute_slices
        info.name = (f"MIG {gi.profile.name}" if slices == gi.profile.compute_slices
                     else f"MIG {slices}c.{gi.profile.name}").encode()
        return info

    def nvmlGpuInstanceCreateComputeInstance(self, gi_handle, profile_id: int):
        gpu, gi = self._gi(gi_handle)
        slices = self._ci_slices(gi, profile_id)
        start = next((s for s in range(0, gi.profile.compute_slices - slices + 1, slices)
                      if self._ci_free(gi, s, slices)), None)
        if start is None:
            raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._create_ci(gpu, gi, profile_id, start, slices)

    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(self, gi_handle, profile_id: int, placement):
        gpu, gi = self._gi(gi_handle)
        slices = self._ci_slices(gi, profile_id)
        where = _deref(placement)
        if where.size != slices or where.start % slices or where.start + slices > gi.profile.compute_slices:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if not self._ci_free(gi, where.start, slices):
            raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._create_ci(gpu, gi, profile_id, where.start, slices)

    @staticmethod
    def _ci_free(gi: _GpuInstance, start: int, slices: int) -> bool:
        taken = {s for ci in gi.cis.values() for s in range(ci.start, ci.start + ci.size)}
        return not taken & set(range(start, start + slices))

    def _create_ci(self, gpu: _Gpu, gi: _GpuInstance, profile_id: int, start: int, slices: int):
        self._need_privilege()
        self._creation()
        ci_id = next(i for i in itertools.count() if i not in gi.cis)
        ci = _ComputeInstance(self._key(), ci_id, profile_id, start, slices,
                              f"MIG-{_uuid(f'{gpu.uuid}/{gi.id}/{ci_id}/{self._creations}')}")
        ci.handle_struct = struct_c_nvmlComputeInstance_t(ci.key)
        ci.mig_device_struct = struct_c_nvmlDevice_t(self._key())
        gi.cis[ci_id] = ci
        self._objects[ci.key] = (gpu, gi, ci)
        self._objects[ci.mig_device_struct.key] = (gpu, gi, ci)
        self.calls.append(f"nvmlGpuInstanceCreateComputeInstance({gi.profile.name}@{gi.start}, {profile_id}@{start})")
        return ctypes.pointer(ci.handle_struct)

    def nvmlComputeInstanceDestroy(self, ci_handle) -> int:
        gpu, gi, ci = self._ci(ci_handle)
        self._need_privilege()
        if self._processes(gpu, ci):
            raise NVMLError(NVML_ERROR_IN_USE)
        self.calls.append(f"nvmlComputeInstanceDestroy({gi.profile.name}@{gi.start}, {ci.id})")
        self._forget_ci(gi, ci)
        return NVML_SUCCESS

    def nvmlGpuInstanceGetComputeInstances(self, gi_handle, profile_id: int, ci_array, count_ref) -> int:
        gpu, gi = self._gi(gi_handle)
        self._ci_slices(gi, profile_id)
        found = [ci for ci in sorted(gi.cis.values(), key=lambda c: c.id) if ci.profile == profile_id]
        return _fill(ci_array, _deref(count_ref), [ctypes.pointer(ci.handle_struct) for ci in found])

    def nvmlGpuInstanceGetComputeInstanceById(self, gi_handle, ci_id: int):
        gpu, gi = self._gi(gi_handle)
        if ci_id not in gi.cis:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return ctypes.pointer(gi.cis[ci_id].handle_struct)

    def nvmlComputeInstanceGetInfo(self, ci_handle):
        gpu, gi, ci = self._ci(ci_handle)
        info = c_nvmlComputeInstanceInfo_t()
        info.device, info.gpuInstance = ctypes.pointer(gpu.handle_struct), ctypes.pointer(gi.handle_struct)
        info.id, info.profileId = ci.id, ci.profile
        info.placement.start, info.placement.size = ci.start, ci.size
        return info

    nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo

    # -- MIG devices ---------------------------------------------------------------------------------------------
    def nvmlDeviceGetMaxMigDeviceCount(self, handle) -> int:
        return self._parent(handle).model.compute_slices

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index: int):
        gpu = self._parent(handle)
        self._need_mig(gpu)
        cis = [ci for gi in sorted(gpu.gis.values(), key=lambda g: g.id)
               for ci in sorted(gi.cis.values(), key=lambda c: c.id)]
        if not 0 <= index < len(cis):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return ctypes.pointer(cis[index].mig_device_struct)

    def nvmlDeviceIsMigDeviceHandle(self, handle) -> int:
        return int(self._device(handle)[1] is not None)

    def nvmlDeviceGetGpuInstanceId(self, handle) -> int:
        gpu, mig = self._device(handle)
        if mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self._gi_of(gpu, mig).id

    def nvmlDeviceGetComputeInstanceId(self, handle) -> int:
        gpu, mig = self._device(handle)
        if mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return mig.id

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        gpu, mig = self._device(handle)
        if mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return ctypes.pointer(gpu.handle_struct)

    def mig_config_access(self) -> bool:
        """Whether this process may change MIG (root or /proc/driver/nvidia/capabilities/mig/config, on a real GPU)."""
        return self.privileged

    # -- internals -----------------------------------------------------------------------------------------------
    def _key(self) -> int:
        return next(self._keys)

    def _need_init(self) -> None:
        if self._init_count <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _need_privilege(self) -> None:
        if not self.privileged:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)

    def _need_mig(self, gpu: _Gpu) -> None:
        if not gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if gpu.current != NVML_DEVICE_MIG_ENABLE:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def _lookup(self, handle, struct_type) -> Any:
        self._need_init()
        try:
            struct = handle.contents
        except (AttributeError, ValueError):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT) from None
        if not isinstance(struct, struct_type) or struct.key not in self._objects:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self._objects[struct.key]

    def _device(self, handle) -> tuple[_Gpu, _ComputeInstance | None]:
        found = self._lookup(handle, struct_c_nvmlDevice_t)
        return (found, None) if isinstance(found, _Gpu) else (found[0], found[2])

    def _parent(self, handle) -> _Gpu:
        gpu, mig = self._device(handle)
        if mig is not None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    def _gi(self, handle) -> tuple[_Gpu, _GpuInstance]:
        return self._lookup(handle, struct_c_nvmlGpuInstance_t)

    def _ci(self, handle) -> tuple[_Gpu, _GpuInstance, _ComputeInstance]:
        return self._lookup(handle, struct_c_nvmlComputeInstance_t)

    @staticmethod
    def _gi_of(gpu: _Gpu, ci: _ComputeInstance) -> _GpuInstance:
        return next(gi for gi in gpu.gis.values() if ci in gi.cis.values())

    def _processes(self, gpu: _Gpu, mig: _ComputeInstance | None = None) -> list:
        """The GPU's (or MIG device's) processes that still run: a process that exited leaves the GPU."""
        gpu.processes = [p for p in gpu.processes if alive(p.pid)]
        return [p for p in gpu.processes if mig is None or p.device_uuid == mig.uuid]

    def _ids_of_uuid(self, gpu: _Gpu, device_uuid: str) -> tuple[int | None, int | None]:
        for gi in gpu.gis.values():
            for ci in gi.cis.values():
                if ci.uuid == device_uuid:
                    return gi.id, ci.id
        return None, None

    def _profile_by_enum(self, gpu: _Gpu, enum: int) -> Profile:
        if not gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= enum < NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        for p in gpu.model.profiles:
            if p.nvml_profile == enum:
                return p
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def _profile_by_id(self, gpu: _Gpu, profile_id: int) -> Profile:
        if not gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        for p in gpu.model.profiles:
            if p.profile_id == profile_id:
                return p
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def _gi_fits(self, gpu: _Gpu, p: Profile, start: int) -> int | None:
        """None if an instance of `p` can start at `start` now, else the NVML error code creation would give."""
        if start not in p.placements:
            return NVML_ERROR_INVALID_ARGUMENT
        taken = {s for gi in gpu.gis.values() for s in range(gi.start, gi.start + gi.profile.memory_slices)}
        compute = sum(gi.profile.compute_slices for gi in gpu.gis.values())
        same = sum(1 for gi in gpu.gis.values() if gi.profile == p)
        if (taken & set(range(start, start + p.memory_slices)) or compute + p.compute_slices > gpu.model.compute_slices
                or same >= p.max_instances):
            return NVML_ERROR_INSUFFICIENT_RESOURCES
        return None

    def _create_gi(self, gpu: _Gpu, p: Profile, start: int):
        self._need_privilege()
        problem = self._gi_fits(gpu, p, start)
        if problem is not None:
            raise NVMLError(problem)
        self._creation()
        # ids as A100s report them: a node of the binary tree over the memory slices (7g: 0, 4-slice halves 1-2, ...)
        gi_id = gpu.model.memory_slices // p.memory_slices - 1 + start // p.memory_slices
        gi = _GpuInstance(self._key(), gi_id, p, start)
        gi.handle_struct = struct_c_nvmlGpuInstance_t(gi.key)
        gpu.gis[gi_id] = gi
        self._objects[gi.key] = (gpu, gi)
        self.calls.append(f"nvmlDeviceCreateGpuInstance({p.name}@{start})")
        return ctypes.pointer(gi.handle_struct)

    def _creation(self) -> None:
        self._creations += 1
        code = self._fail_at.pop(self._creations, None)
        if code is not None:
            raise NVMLError(code)

    def _ci_slices(self, gi: _GpuInstance, profile: int) -> int:
        slices = {v: k for k, v in FULL_CI_PROFILE.items()}.get(profile)
        if slices is None or slices > gi.profile.compute_slices or (
                slices != gi.profile.compute_slices and gi.profile.compute_slices % slices):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return slices

    def _forget_gi(self, gpu: _Gpu, gi: _GpuInstance) -> None:
        for ci in list(gi.cis.values()):
            self._forget_ci(gi, ci)
        del gpu.gis[gi.id]
        self._objects.pop(gi.key, None)

    def _forget_ci(self, gi: _GpuInstance, ci: _ComputeInstance) -> None:
        del gi.cis[ci.id]
        self._objects.pop(ci.key, None)
        self._objects.pop(ci.mig_device_struct.key, None)


# pynvml's module-level names, reachable as attributes like `pynvml.NVML_DEVICE_MIG_ENABLE`: its own constants and
# error classes (NVMLError_InUse, ...), its structures, and the simulator's handle types
for _name, _value in [*vars(pynvml).items(), *list(globals().items())]:
    if _name.startswith(("NVML_", "NVMLError", "c_nvml", "struct_c_nvml")):
        setattr(SimulatedNvml, _name, _value)


def simulated_gpu(model: str | GpuModel = "H100-80GB", **knobs: Any) -> SimulatedNvml:
    """A simulated NVML with one MIG-capable GPU of `model` (MIG disabled); install it with `nvml.use_backend`,
    or use `simulated(...)`. Knobs: needs_reset, privileged, mig_capable, mig_enabled, gpus."""
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


def _deref(ref) -> Any:
    """The object behind a ctypes pointer or byref(), or the object itself."""
    if hasattr(ref, "contents"):
        return ref.contents
    return getattr(ref, "_obj", ref)


def _fill(array, count, handles: list) -> int:
    """Fill a caller's handle array as NVML does: INSUFFICIENT_SIZE if it is too small."""
    if len(handles) > count.value:
        count.value = len(handles)
        raise NVMLError(NVML_ERROR_INSUFFICIENT_SIZE)
    for i, h in enumerate(handles):
        array[i] = h
    count.value = len(handles)
    return NVML_SUCCESS




def _uuid(text: str) -> str:
    """A stable UUID that says it is simulated wherever it is shown: GPU-simulated-3f2a..., MIG-simulated-..."""
    return "simulated-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"colloc-kit-simulated/{text}"))
