"""The live MIG catalogue: a GPU's own profiles and placements, read through NVML (read-only; it works with MIG
disabled), as a `mig_catalogue.GpuModel` like the built-in tables. On a real GPU it is what the kit plans with: memory
sizes move by a few hundred MiB between drivers.

    >>> from colloc_kit.gpu.mig_simulator import simulated
    >>> with simulated("A30"):
    ...     [p.name for p in live_catalogue(0).profiles][:2]
    ['1g.6gb', '1g.6gb+me']
"""

from __future__ import annotations

import ctypes
from typing import Any

from colloc_kit.errors import GpuStateError
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mig_catalogue import GpuModel, Profile

__all__ = ["live_catalogue", "possible_placements"]


def live_catalogue(device_index: int = 0) -> GpuModel:
    """The GPU's own MIG profiles and placements, read through NVML (read-only; works with MIG disabled).

    Raises NvmlUnavailable without NVML, GpuStateError where NVML refuses the placements; returns a model with
    no profiles on a GPU without MIG.
    """
    with nvml.session() as lib:
        handle = lib.nvmlDeviceGetHandleByIndex(device_index)
        device_name = nvml.text(lib.nvmlDeviceGetName(handle))
        total_mib = int(lib.nvmlDeviceGetMemoryInfo(handle).total // 2**20)
        profiles = []
        for enum in range(lib.NVML_GPU_INSTANCE_PROFILE_COUNT):
            info = nvml.optional(lib.nvmlDeviceGetGpuInstanceProfileInfo, handle, enum).value
            if info is None or info.instanceCount == 0:
                continue
            profiles.append(Profile(
                name=_profile_name(info),
                compute_slices=info.sliceCount,
                memory_slices=0,  # filled in below from the placements' size
                memory_mib=int(info.memorySizeMB),
                sm_count=info.multiprocessorCount,
                max_instances=info.instanceCount,
                nvml_profile=enum,
                profile_id=info.id,
                placements=(),
            ))
        placed = [_with_placements(lib, handle, p) for p in profiles]
    full = max(placed, key=lambda p: p.compute_slices, default=None)
    return GpuModel(
        name=f"{device_name} (live)",
        compute_slices=full.compute_slices if full else 0,
        memory_slices=full.memory_slices if full else 0,
        sm_count=full.sm_count if full else 0,
        total_memory_mib=total_mib,
        profiles=tuple(sorted(placed, key=lambda p: (p.compute_slices, p.memory_slices, p.media_extensions))),
        source=f"read through NVML from GPU {device_index}",
        nvml_names=(device_name,),
    )


def possible_placements(lib: Any, handle: Any, profile_id: int) -> list[tuple[int, int]]:
    """(start, size) in memory slices, from nvmlDeviceGetGpuInstancePossiblePlacements_v2."""
    capacity = 16
    array = (lib.c_nvmlGpuInstancePlacement_t * capacity)()
    count = ctypes.c_uint(capacity)
    lib.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array, ctypes.pointer(count))
    return [(array[i].start, array[i].size) for i in range(count.value)]


def _with_placements(lib: Any, handle: Any, profile: Profile) -> Profile:
    try:
        pairs = possible_placements(lib, handle, profile.profile_id)
    except Exception as exc:
        if not nvml.is_nvml_error(exc):
            raise
        raise GpuStateError(f"NVML would not give the MIG placements of {profile.name} ({nvml.describe_error(exc)}); "
                            f"reading them may need root. Plan with a built-in table instead (--gpu MODEL)") from exc
    size = pairs[0][1] if pairs else 0
    return Profile(**{**profile.__dict__, "memory_slices": size, "placements": tuple(s for s, _ in pairs)})


def _profile_name(info: Any) -> str:
    """NVML's own name of the profile (v2 info carries 'MIG 1g.10gb'), without the 'MIG ' prefix."""
    raw = nvml.text(info.name).strip()
    return raw[4:] if raw.lower().startswith("mig ") else raw
