"""The MIG state of one GPU read through NVML: its mode and pending mode, its GPU instances with their placements,
compute instances and MIG device UUIDs (`read_state` -> `MigState`), and whether this process may change MIG.
`mig_apply` reads it before changing anything, and keeps what it found to put it back.

    >>> from colloc_kit.gpu.mig_live import live_catalogue
    >>> from colloc_kit.gpu.mig_simulator import simulated
    >>> with simulated("A30", mig_enabled=True), nvml.session() as lib:
    ...     read_state(lib, lib.nvmlDeviceGetHandleByIndex(0), live_catalogue(0)).describe()
    {'mig_mode': 'enabled', 'pending_mode': 'enabled', 'instances': []}
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GpuModel

__all__ = ["ExistingInstance", "MIG_CONFIG_CAPABILITY", "MigState", "compute_instances", "mig_config_access",
           "mig_device_uuids", "mode_name", "read_state"]


MIG_CONFIG_CAPABILITY = "/proc/driver/nvidia/capabilities/mig/config"
_MAX_HANDLES = 16


@dataclass(frozen=True)
class ExistingInstance:
    """A GPU instance found on the GPU, with its compute instances as (profile id, start, size)."""

    gi_id: int
    profile_id: int
    profile: str
    start: int
    size: int
    compute_instances: tuple[tuple[int, int, int], ...]
    uuids: tuple[str, ...] = ()


@dataclass(frozen=True)
class MigState:
    """The MIG state of one GPU: mode, pending mode and instances."""

    mode: int
    pending: int
    instances: tuple[ExistingInstance, ...]

    def describe(self) -> dict[str, Any]:
        """Plain values for a manifest or `colloc-kit mig show`: mode names, and per instance its id, profile,
        placement ('start:size' in memory slices), compute instances and MIG device UUIDs."""
        return {"mig_mode": mode_name(self.mode), "pending_mode": mode_name(self.pending),
                "instances": [{"gpu_instance": i.gi_id, "profile": i.profile, "placement": f"{i.start}:{i.size}",
                               "compute_instances": len(i.compute_instances), "uuids": list(i.uuids)}
                              for i in self.instances]}


def read_state(lib: Any, handle: Any, catalogue: GpuModel) -> MigState:
    """Mode, pending mode and the instances on the GPU (empty while MIG is off)."""
    current, pending = lib.nvmlDeviceGetMigMode(handle)
    if current != lib.NVML_DEVICE_MIG_ENABLE:
        return MigState(current, pending, ())
    uuids = mig_device_uuids(lib, handle)
    found = []
    for profile in catalogue.profiles:
        for gi in _handles(lib.c_nvmlGpuInstance_t, lib.nvmlDeviceGetGpuInstances, handle, profile.profile_id):
            info = lib.nvmlGpuInstanceGetInfo(gi)
            cis = []
            for ci in compute_instances(lib, gi):
                ci_info = lib.nvmlComputeInstanceGetInfo(ci)
                cis.append((ci_info.profileId, ci_info.placement.start, ci_info.placement.size, ci_info.id))
            found.append(ExistingInstance(
                info.id, profile.profile_id, profile.name, info.placement.start, info.placement.size,
                tuple(sorted(c[:3] for c in cis)), tuple(uuids[(info.id, c[3])] for c in sorted(cis, key=lambda c: c[3])
                                                         if (info.id, c[3]) in uuids)))
    return MigState(current, pending, tuple(sorted(found, key=lambda i: i.start)))


def mig_device_uuids(lib: Any, handle: Any) -> dict[tuple[int, int], str]:
    """{(GPU instance id, compute instance id): 'MIG-...'} for the MIG devices of a GPU."""
    uuids = {}
    for index in range(lib.nvmlDeviceGetMaxMigDeviceCount(handle)):
        mig = nvml.optional(lib.nvmlDeviceGetMigDeviceHandleByIndex, handle, index).value
        if mig is not None:
            key = (lib.nvmlDeviceGetGpuInstanceId(mig), lib.nvmlDeviceGetComputeInstanceId(mig))
            uuids[key] = nvml.text(lib.nvmlDeviceGetUUID(mig))
    return uuids


def mig_config_access(lib: Any) -> bool:
    """Whether this process may change MIG: root, or read access to the MIG config capability.

    A simulated NVML answers for itself (`mig_config_access()`), since its permissions are not the machine's.
    """
    if hasattr(lib, "mig_config_access"):
        return lib.mig_config_access()
    return os.geteuid() == 0 or os.access(MIG_CONFIG_CAPABILITY, os.R_OK)


def _handles(handle_type: Any, getter: Any, parent: Any, profile_id: int) -> list:
    array = (handle_type * _MAX_HANDLES)()
    count = ctypes.c_uint(_MAX_HANDLES)
    result = nvml.optional(getter, parent, profile_id, array, ctypes.pointer(count))
    return [array[i] for i in range(count.value)] if result.reason is None else []


def compute_instances(lib: Any, gi: Any) -> list:
    """The handles of every compute instance inside GPU instance `gi`, over each compute-instance profile NVML
    knows (`lib`: pynvml or the simulated NVML); a profile NVML does not offer here is passed over."""
    found = []
    for enum in range(lib.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
        info = nvml.optional(lib.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, enum,
                             lib.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED).value
        if info is not None:
            found += _handles(lib.c_nvmlComputeInstance_t, lib.nvmlGpuInstanceGetComputeInstances, gi, info.id)
    return found



def mode_name(mode: int) -> str:
    """NVML's MIG mode in words: 'disabled', 'enabled'."""
    return {0: "disabled", 1: "enabled"}.get(mode, str(mode))
