"""The instances inside a simulated MIG GPU of `mig_state`: its GPU instances, their compute instances (each a MIG
device) and the processes on them, with the rules a real GPU enforces inside a GPU instance (which compute slices a
compute instance may take, what is refused while something runs). A refused change raises pynvml's own `NVMLError`
with the code a real GPU gives.

    >>> from colloc_kit.gpu.mig_state import SimulatedHost
    >>> gpu = SimulatedHost("A100-40GB", mig_enabled=True).gpus[0]
    >>> gi = gpu.create_gpu_instance(9)  # 3g.20gb
    >>> [(ci.start, ci.size) for ci in (gi.create_compute_instance(0), gi.create_compute_instance(0))]
    [(0, 1), (1, 1)]
"""

from __future__ import annotations

import itertools
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pynvml import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_INVALID_STATE,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVMLError,
)

from colloc_kit.gpu.mig_catalogue import FULL_CI_PROFILE, Profile

if TYPE_CHECKING:  # type-only: the GPU an instance is on (mig_state builds its instances from this module)
    from colloc_kit.gpu.mig_state import SimulatedGpu

__all__ = ["ComputeInstance", "GpuInstance", "GpuProcess", "simulated_uuid"]


# Three codes the simulator raises have no text in pynvml, which asks the driver for it (nvmlErrorString); the
# simulator stands in for the driver, so it gives the driver's strings, as a real GPU would.
for _code, _text in ((NVML_ERROR_IN_USE, "In use by another client"),
                     (NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient resources"),
                     (NVML_ERROR_INVALID_STATE, "Invalid state")):
    NVMLError._errcode_to_string.setdefault(_code, _text)

_SLICES_OF_CI_PROFILE = {profile: slices for slices, profile in FULL_CI_PROFILE.items()}
# The hardware objects compare by identity (eq=False): an instance recreated at the same place is another one, and
# a handle to the old one is stale.


@dataclass
class GpuProcess:
    """A process computing on a GPU, or on one of its MIG devices when `device_uuid` is a MIG device's."""

    pid: int
    used_bytes: int
    device_uuid: str


@dataclass(eq=False)
class ComputeInstance:
    """A compute instance: `size` compute slices from `start` inside its GPU instance; `uuid` names its MIG device.

    `profile` is the NVML_COMPUTE_INSTANCE_PROFILE_* enum, which is also its profile id on A100/H100.
    """

    gpu_instance: GpuInstance = field(repr=False)
    id: int
    profile: int
    start: int
    size: int
    uuid: str

    @property
    def exists(self) -> bool:
        """False once destroyed (or gone with its GPU instance): a handle to it is then stale."""
        return self.gpu_instance.exists and self.gpu_instance.compute_instances.get(self.id) is self

    def destroy(self) -> None:
        """Destroy it; NO_PERMISSION without privilege, IN_USE while a process runs on its MIG device."""
        gpu = self.gpu_instance.gpu
        gpu.host.require_privilege()
        if gpu.running(self):
            raise NVMLError(NVML_ERROR_IN_USE)
        del self.gpu_instance.compute_instances[self.id]


@dataclass(eq=False)
class GpuInstance:
    """A GPU instance of `profile` from memory slice `start`, and its compute instances by id."""

    gpu: SimulatedGpu = field(repr=False)
    id: int
    profile: Profile
    start: int
    compute_instances: dict[int, ComputeInstance] = field(default_factory=dict)

    @property
    def memory_range(self) -> range:
        """The memory slices it covers."""
        return range(self.start, self.start + self.profile.memory_slices)

    @property
    def exists(self) -> bool:
        """False once destroyed (or gone in a GPU reset): a handle to it is then stale."""
        return self.gpu.gpu_instances.get(self.id) is self

    def compute_slices_of(self, ci_profile: int) -> int:
        """The compute slices a compute instance of `ci_profile` takes here; NOT_SUPPORTED where it cannot be made
        (more slices than the instance has, or a size that does not divide them)."""
        slices, whole = _SLICES_OF_CI_PROFILE.get(ci_profile), self.profile.compute_slices
        if slices is None or slices > whole or (slices != whole and whole % slices):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return slices

    def slices_free(self, start: int, slices: int) -> bool:
        """Whether no compute instance holds any of the compute slices `start` .. `start + slices - 1`."""
        taken = {s for ci in self.compute_instances.values() for s in range(ci.start, ci.start + ci.size)}
        return not taken & set(range(start, start + slices))

    def create_compute_instance(self, ci_profile: int, start: int | None = None,
                                size: int | None = None) -> ComputeInstance:
        """A new compute instance of `ci_profile` at compute slice `start` (`size` slices, if given), or at the first
        free aligned start. INVALID_ARGUMENT for a misaligned or oversized placement, INSUFFICIENT_RESOURCES for
        taken slices, NO_PERMISSION without privilege; an injected failure (`SimulatedHost.fail_creation`)."""
        slices = self.compute_slices_of(ci_profile)
        if start is None:
            start = next((s for s in range(0, self.profile.compute_slices - slices + 1, slices)
                          if self.slices_free(s, slices)), None)
            if start is None:
                raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        else:
            if size not in (None, slices) or start % slices or start + slices > self.profile.compute_slices:
                raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
            if not self.slices_free(start, slices):
                raise NVMLError(NVML_ERROR_INSUFFICIENT_RESOURCES)
        self.gpu.host.require_privilege()
        creation = self.gpu.host.count_creation()
        ci_id = next(i for i in itertools.count() if i not in self.compute_instances)
        ci = ComputeInstance(self, ci_id, ci_profile, start, slices,
                             f"MIG-{simulated_uuid(f'{self.gpu.uuid}/{self.id}/{ci_id}/{creation}')}")
        self.compute_instances[ci_id] = ci
        return ci

    def compute_instances_of(self, ci_profile: int) -> list[ComputeInstance]:
        """Its compute instances of `ci_profile`, by id; NOT_SUPPORTED for a profile it cannot hold."""
        self.compute_slices_of(ci_profile)
        return [ci for _, ci in sorted(self.compute_instances.items()) if ci.profile == ci_profile]

    def compute_instance(self, ci_id: int) -> ComputeInstance:
        """The compute instance with id `ci_id`; NOT_FOUND if none."""
        if ci_id not in self.compute_instances:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return self.compute_instances[ci_id]

    def destroy(self) -> None:
        """Destroy it; NO_PERMISSION without privilege, IN_USE while it holds compute instances."""
        self.gpu.host.require_privilege()
        if self.compute_instances:
            raise NVMLError(NVML_ERROR_IN_USE)
        del self.gpu.gpu_instances[self.id]


def simulated_uuid(text: str) -> str:
    """A stable UUID that says it is simulated wherever it is shown: GPU-simulated-3f2a..., MIG-simulated-..."""
    return "simulated-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"colloc-kit-simulated/{text}"))
