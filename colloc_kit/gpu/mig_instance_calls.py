"""The simulated NVML's GPU-instance and compute-instance functions (pynvml's names: create, destroy, list, look
up, describe), as `InstanceCalls`, a part of `mig_simulator.SimulatedNvml`: handles in, the instances of
`mig_instances` and `mig_state` asked, pynvml's structures and handles out; each change made is recorded in `calls`.

    >>> from colloc_kit.gpu.mig_simulator import SimulatedNvml
    >>> sim = SimulatedNvml("A100-40GB", mig_enabled=True)
    >>> sim.nvmlInit()
    >>> gi = sim.nvmlDeviceCreateGpuInstance(sim.nvmlDeviceGetHandleByIndex(0), 9)
    >>> sim.nvmlGpuInstanceGetInfo(gi).placement.start, sim.calls
    (0, ['nvmlDeviceCreateGpuInstance(3g.20gb@0)'])
"""

from __future__ import annotations

from pynvml import (  # pynvml's own constants, error class and structures
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_SUCCESS,
    NVMLError,
    c_nvmlComputeInstanceProfileInfo_v2_t,
    c_nvmlGpuInstanceProfileInfo_v2_t,
)

from colloc_kit.gpu.mig_catalogue import Profile
from colloc_kit.gpu.mig_handles import (
    HandleTable, c_nvmlComputeInstanceInfo_t, c_nvmlGpuInstanceInfo_t, deref, fill, struct_c_nvmlComputeInstance_t,
    struct_c_nvmlDevice_t, struct_c_nvmlGpuInstance_t,
)
from colloc_kit.gpu.mig_instances import ComputeInstance, GpuInstance

__all__ = ["InstanceCalls"]


class InstanceCalls:
    """pynvml's functions on GPU instances and compute instances, over the handles of `_handles`; `SimulatedNvml`
    holds them (and sets `_handles` and `calls`)."""

    _handles: HandleTable
    calls: list[str]  # names of the mutating calls made, in order (tests read it)

    # -- GPU instances -------------------------------------------------------------------------------------------
    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, profile: int, version: int = 2):
        """The info of profile NVML_GPU_INSTANCE_PROFILE_* `profile`: id, slices, instance count, SMs, memory, name."""
        return _profile_info(self._handles.parent(handle).profile_by_enum(profile))

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, handle, profile_id: int):
        """The info of the profile with id `profile_id`."""
        return _profile_info(self._handles.parent(handle).profile_by_id(profile_id))

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle, profile_id: int, placements, count_ref) -> int:
        """Fill `placements` with the profile's (start, size) in memory slices; with None, just set the count."""
        p = self._handles.parent(handle).profile_by_id(profile_id)
        count = deref(count_ref)
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
        """How many more instances of the profile could be created now."""
        return self._handles.parent(handle).remaining_capacity(profile_id)

    def nvmlDeviceCreateGpuInstance(self, handle, profile_id: int):
        """A new GPU instance of the profile at its first free placement."""
        return self._created_gi(self._handles.parent(handle).create_gpu_instance(profile_id))

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle, profile_id: int, placement):
        """A new GPU instance of the profile at `placement` (a c_nvmlGpuInstancePlacement_t, by reference)."""
        gpu, where = self._handles.parent(handle), deref(placement)
        return self._created_gi(gpu.create_gpu_instance(profile_id, where.start, where.size))

    def nvmlGpuInstanceDestroy(self, gi_handle) -> int:
        """Destroy the GPU instance; IN_USE while it holds compute instances."""
        gi = self._handles.gi(gi_handle)
        gi.destroy()
        self.calls.append(f"nvmlGpuInstanceDestroy({gi.profile.name}@{gi.start})")
        return NVML_SUCCESS

    def nvmlDeviceGetGpuInstances(self, handle, profile_id: int, gi_array, count_ref) -> int:
        """Fill `gi_array` with the handles of the profile's GPU instances; INSUFFICIENT_SIZE if it is too small."""
        found = self._handles.parent(handle).gpu_instances_of(profile_id)
        return fill(gi_array, deref(count_ref), [self._handles.handle(struct_c_nvmlGpuInstance_t, gi) for gi in found])

    def nvmlDeviceGetGpuInstanceById(self, handle, gi_id: int):
        """The handle of the GPU instance with id `gi_id`; NOT_FOUND if none."""
        return self._handles.handle(struct_c_nvmlGpuInstance_t, self._handles.parent(handle).gpu_instance(gi_id))

    def nvmlGpuInstanceGetInfo(self, gi_handle):
        """The GPU instance's device, id, profile id and placement."""
        gi = self._handles.gi(gi_handle)
        info = c_nvmlGpuInstanceInfo_t()
        info.device, info.id = self._handles.handle(struct_c_nvmlDevice_t, gi.gpu), gi.id
        info.profileId = gi.profile.profile_id
        info.placement.start, info.placement.size = gi.start, gi.profile.memory_slices
        return info

    # -- compute instances ---------------------------------------------------------------------------------------
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi_handle, profile: int, eng_profile: int, version: int = 2):
        """The info of compute-instance profile `profile` inside the GPU instance; NOT_SUPPORTED if it cannot be."""
        gi = self._handles.gi(gi_handle)
        whole, slices = gi.profile, gi.compute_slices_of(profile)
        info = c_nvmlComputeInstanceProfileInfo_v2_t()
        info.version, info.id, info.sliceCount = 2, profile, slices
        info.instanceCount = whole.compute_slices // slices
        info.multiprocessorCount = whole.sm_count * slices // whole.compute_slices
        info.name = (f"MIG {whole.name}" if slices == whole.compute_slices
                     else f"MIG {slices}c.{whole.name}").encode()
        return info

    def nvmlGpuInstanceCreateComputeInstance(self, gi_handle, profile_id: int):
        """A new compute instance of the profile at the first free compute slices of the GPU instance."""
        return self._created_ci(self._handles.gi(gi_handle).create_compute_instance(profile_id))

    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(self, gi_handle, profile_id: int, placement):
        """A new compute instance at `placement` (a c_nvmlComputeInstancePlacement_t, by reference)."""
        gi, where = self._handles.gi(gi_handle), deref(placement)
        return self._created_ci(gi.create_compute_instance(profile_id, where.start, where.size))

    def nvmlComputeInstanceDestroy(self, ci_handle) -> int:
        """Destroy the compute instance; IN_USE while a process runs on it."""
        ci = self._handles.ci(ci_handle)
        ci.destroy()
        gi = ci.gpu_instance
        self.calls.append(f"nvmlComputeInstanceDestroy({gi.profile.name}@{gi.start}, {ci.id})")
        return NVML_SUCCESS

    def nvmlGpuInstanceGetComputeInstances(self, gi_handle, profile_id: int, ci_array, count_ref) -> int:
        """Fill `ci_array` with the handles of the profile's compute instances; INSUFFICIENT_SIZE if too small."""
        found = self._handles.gi(gi_handle).compute_instances_of(profile_id)
        handles = [self._handles.handle(struct_c_nvmlComputeInstance_t, ci) for ci in found]
        return fill(ci_array, deref(count_ref), handles)

    def nvmlGpuInstanceGetComputeInstanceById(self, gi_handle, ci_id: int):
        """The handle of the compute instance with id `ci_id`; NOT_FOUND if none."""
        return self._handles.handle(struct_c_nvmlComputeInstance_t, self._handles.gi(gi_handle).compute_instance(ci_id))

    def nvmlComputeInstanceGetInfo(self, ci_handle):
        """The compute instance's device, GPU instance, id, profile id and placement."""
        ci = self._handles.ci(ci_handle)
        info = c_nvmlComputeInstanceInfo_t()
        info.device = self._handles.handle(struct_c_nvmlDevice_t, ci.gpu_instance.gpu)
        info.gpuInstance = self._handles.handle(struct_c_nvmlGpuInstance_t, ci.gpu_instance)
        info.id, info.profileId = ci.id, ci.profile
        info.placement.start, info.placement.size = ci.start, ci.size
        return info

    nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo

    # -- new instances -------------------------------------------------------------------------------------------
    def _created_gi(self, gi: GpuInstance):
        self.calls.append(f"nvmlDeviceCreateGpuInstance({gi.profile.name}@{gi.start})")
        return self._handles.handle(struct_c_nvmlGpuInstance_t, gi)

    def _created_ci(self, ci: ComputeInstance):
        where = f"{ci.gpu_instance.profile.name}@{ci.gpu_instance.start}"
        self.calls.append(f"nvmlGpuInstanceCreateComputeInstance({where}, {ci.profile}@{ci.start})")
        return self._handles.handle(struct_c_nvmlComputeInstance_t, ci)


def _profile_info(p: Profile):
    """pynvml's GPU-instance profile info structure for `p`."""
    info = c_nvmlGpuInstanceProfileInfo_v2_t()
    info.version, info.id, info.sliceCount, info.instanceCount = 2, p.profile_id, p.compute_slices, p.max_instances
    info.multiprocessorCount, info.copyEngineCount, info.memorySizeMB = p.sm_count, p.compute_slices, p.memory_mib
    info.name = f"MIG {p.name}".encode()
    return info
