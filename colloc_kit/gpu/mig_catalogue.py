"""MIG profile catalogue: built-in tables for planning without a GPU (the live table read through NVML: `mig_live`).

A MIG-capable GPU has a few compute slices (7 on A100/H100/H200, 4 on A30) and memory slices (8, or 4 on A30).
A GPU-instance profile takes some of each and may only start at certain memory slices; NVML's placements
(`nvmlDeviceGetGpuInstancePossiblePlacements_v2`) count in memory slices: "Index of first occupied memory
slice" and "Number of memory slices occupied" (NVML API reference, nvmlGpuInstancePlacement_t). So a 3g
instance occupies 4 memory slices ({0,4}:4 in `nvidia-smi mig -lgipp`) and 3g + 3g fill all 8 memory slices
while using 6 of the 7 compute slices: the seventh compute slice stays idle.

`resolve` is the stable entry point (the MPS mode uses it to turn a MIG-like layout into thread percentages
and memory limits)::

    >>> p = resolve("3g", "H100-80GB")
    >>> p.name, p.compute_slices, p.memory_slices, p.memory_mib, p.sm_count, p.placements
    ('3g.40gb', 3, 4, 40448, 60, (0, 4))
    >>> resolve("1g.10gb+me", "H100-80GB").profile_id
    20
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from colloc_kit.errors import BadInput

__all__ = ["FULL_CI_PROFILE", "GPU_MODELS", "GpuModel", "MAX_COUNT", "Profile", "gpu_model", "model_for_device",
           "parse_layout", "resolve"]

# NVML_COMPUTE_INSTANCE_PROFILE_* enum of the compute instance that spans a whole GPU instance,
# by compute slices (pynvml: NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0, ..., _7_SLICE = 4, _8_SLICE = 5, _6_SLICE = 6).
FULL_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile of one GPU model.

    `placements` are the memory slices an instance may start at; it then covers `memory_slices` of them.
    `nvml_profile` is the NVML_GPU_INSTANCE_PROFILE_* enum (what nvmlDeviceGetGpuInstanceProfileInfo takes);
    `profile_id` is `info.id`, what creation and `nvidia-smi mig -cgi` take (19 for 1g.10gb on H100).
    """

    name: str
    compute_slices: int
    memory_slices: int
    memory_mib: int
    sm_count: int
    max_instances: int
    nvml_profile: int
    profile_id: int
    placements: tuple[int, ...]

    @property
    def short(self) -> str:
        """The short form, e.g. '3g'."""
        return f"{self.compute_slices}g"

    @property
    def media_extensions(self) -> bool:
        """Whether the profile comes with the media extensions (video decoders, JPEG, OFA): '1g.10gb+me'."""
        return self.name.endswith("+me")

    @property
    def ci_profile(self) -> int:
        """NVML_COMPUTE_INSTANCE_PROFILE_* enum of the compute instance that uses the whole GPU instance."""
        return FULL_CI_PROFILE[self.compute_slices]


@dataclass(frozen=True)
class GpuModel:
    """A MIG-capable GPU model: its slices and profiles. `source` says where the numbers come from."""

    name: str
    compute_slices: int
    memory_slices: int
    sm_count: int
    total_memory_mib: int
    profiles: tuple[Profile, ...]
    source: str = ""
    nvml_names: tuple[str, ...] = field(default=())

    def profile_names(self) -> list[str]:
        """The full names of its profiles, in table order.

        >>> gpu_model("A30").profile_names()[:2]
        ['1g.6gb', '1g.6gb+me']
        """
        return [p.name for p in self.profiles]


def _table(rows: list[tuple]) -> tuple[Profile, ...]:
    return tuple(Profile(*(*row[:8], tuple(row[8]))) for row in rows)  # the 9th column, placements, as a tuple


def _seven_slice_table(rows: list[tuple[str, int, int]]) -> tuple[Profile, ...]:
    """The profiles of a 7-compute/8-memory-slice GPU (A100, H100, H200) from (name, memory MiB, SMs) per profile,
    in the order of `_SEVEN_SLICE_SHAPE`: the slices, instance counts, NVML enums, ids and placements are the same
    on all of them."""
    return _table([(name, compute, memory, mib, sms, *rest)
                   for (name, mib, sms), (compute, memory, *rest) in zip(rows, _SEVEN_SLICE_SHAPE, strict=True)])


_SEVEN = range(7)
# (compute slices, memory slices, max instances, NVML profile enum, profile id, placements) of 1g, 1g+me, 1g with
# 2 memory slices, 2g, 3g, 4g and 7g on every 7-compute/8-memory-slice GPU. Placements from `nvidia-smi mig -lgipp`
# (e.g. H100 NVL, Colfax Research "MIG and vGPU" 2024): 1g {0..6}:1, 1g with 2 memory slices {0,2,4,6}:2,
# 2g {0,2,4}:2, 3g {0,4}:4, 4g {0}:4, 7g {0}:8. A30: 1g {0,1,2,3}:1, 2g {0,2}:2, 4g {0}:4.
_SEVEN_SLICE_SHAPE = [(1, 1, 7, 0, 19, _SEVEN), (1, 1, 1, 7, 20, _SEVEN), (1, 2, 4, 9, 15, (0, 2, 4, 6)),
                      (2, 2, 3, 1, 14, (0, 2, 4)), (3, 4, 2, 2, 9, (0, 4)), (4, 4, 1, 3, 5, (0,)),
                      (7, 8, 1, 4, 0, (0,))]
# `_table` columns: name, compute slices, memory slices, memory MiB, SMs, max instances, NVML profile enum,
# profile id, placements (start memory slices); `_seven_slice_table` takes name, memory MiB, SMs.
# Memory MiB is nvidia-smi's GiB column x 1024; it moves by a few hundred MiB between drivers, so on a real GPU
# the live catalogue (`mig_live.live_catalogue`) is what the kit plans with.
GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel(
            "H100-80GB", 7, 8, 132, 81559,
            _seven_slice_table([
                ("1g.10gb", 9984, 16),
                ("1g.10gb+me", 9984, 16),
                ("1g.20gb", 20096, 26),
                ("2g.20gb", 20096, 32),
                ("3g.40gb", 40448, 60),
                ("4g.40gb", 40448, 64),
                ("7g.80gb", 81152, 132),
            ]),
            source="measured on the lent H100 80GB HBM3, driver 580.159.04 (shared/GPU_FACTS.md)",
            nvml_names=("NVIDIA H100 80GB HBM3",),
        ),
        GpuModel(
            "A100-40GB", 7, 8, 108, 40960,
            _seven_slice_table([
                ("1g.5gb", 4864, 14),
                ("1g.5gb+me", 4864, 14),
                ("1g.10gb", 9984, 14),
                ("2g.10gb", 9984, 28),
                ("3g.20gb", 20096, 42),
                ("4g.20gb", 20096, 56),
                ("7g.40gb", 40448, 98),
            ]),
            source="NVIDIA MIG user guide (Supported MIG Profiles: A100) and `nvidia-smi mig -lgip` on "
                   "A100-PCIE-40GB, R525+ drivers (4.75/9.75/19.62/39.50 GiB)",
            nvml_names=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "A100-SXM4-40GB", "A100-PCIE-40GB"),
        ),
        GpuModel(
            "A100-80GB", 7, 8, 108, 81920,
            _seven_slice_table([
                ("1g.10gb", 9728, 14),
                ("1g.10gb+me", 9728, 14),
                ("1g.20gb", 19968, 14),
                ("2g.20gb", 19968, 28),
                ("3g.40gb", 40192, 42),
                ("4g.40gb", 40192, 56),
                ("7g.80gb", 80896, 98),
            ]),
            source="NVIDIA MIG user guide (A100-SXM4-80GB names) and `nvidia-smi mig -lgip` on A100 80GB, "
                   "driver 515 (9.50/19.50/39.25/79.00 GiB)",
            nvml_names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"),
        ),
        GpuModel(
            "H100-94GB", 7, 8, 132, 95830,
            _seven_slice_table([
                ("1g.12gb", 10880, 16),
                ("1g.12gb+me", 10880, 16),
                ("1g.24gb", 22016, 26),
                ("2g.24gb", 22016, 32),
                ("3g.47gb", 47232, 60),
                ("4g.47gb", 47232, 64),
                ("7g.94gb", 94848, 132),
            ]),
            source="`nvidia-smi mig -lgip` on H100 NVL 94GB (10.62/21.50/46.12/92.62 GiB); placements from "
                   "`nvidia-smi mig -lgipp` on H100 NVL",
            nvml_names=("NVIDIA H100 NVL",),
        ),
        GpuModel(
            "H200-141GB", 7, 8, 132, 144384,
            _seven_slice_table([
                ("1g.18gb", 16384, 16),
                ("1g.18gb+me", 16384, 16),
                ("1g.35gb", 33280, 26),
                ("2g.35gb", 33280, 32),
                ("3g.71gb", 71424, 60),
                ("4g.71gb", 71424, 64),
                ("7g.141gb", 143360, 132),
            ]),
            source="NVML's live catalogue on an H200 (driver 580.159.04, MIG disabled, read-only; "
                   "2026-11-22, read then and not kept in the repository): every profile's slices, memory, SMs, "
                   "instance count and placements",
            nvml_names=("NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA H200 141GB HBM3e"),
        ),
        GpuModel(
            "A30", 4, 4, 56, 24576,
            _table([
                ("1g.6gb", 1, 1, 5952, 14, 4, 0, 14, range(4)),
                ("1g.6gb+me", 1, 1, 5952, 14, 1, 7, 21, range(4)),
                ("2g.12gb", 2, 2, 11968, 28, 2, 1, 5, (0, 2)),
                ("2g.12gb+me", 2, 2, 11968, 28, 1, 8, 6, (0, 2)),
                ("4g.24gb", 4, 4, 24000, 56, 1, 3, 0, (0,)),
            ]),
            source="NVIDIA MIG user guide (Supported MIG Profiles: A30) and `nvidia-smi mig -lgip`/`-lgipp` on "
                   "A30-24GB (5.81/11.69/23.44 GiB)",
            nvml_names=("NVIDIA A30",),
        ),
    )
}

_ALIASES = {"H100": "H100-80GB", "H100-NVL": "H100-94GB", "H200": "H200-141GB", "A100": "A100-40GB",
            "A30-24GB": "A30"}


def gpu_model(model: str | GpuModel) -> GpuModel:
    """A built-in model by name ('H100-80GB', 'A100-40GB', 'H200', ...), or the given GpuModel itself.

    >>> gpu_model("h100").name
    'H100-80GB'
    """
    if isinstance(model, GpuModel):
        return model
    key = str(model).strip().upper().replace(" ", "-")
    key = _ALIASES.get(key, key)
    for name, found in GPU_MODELS.items():
        if name.upper() == key:
            return found
    raise BadInput(f"unknown GPU model {model!r}; give --gpu with one of the built-in MIG tables: "
                   f"{', '.join(GPU_MODELS)}")


def resolve(name: str, gpu_model_or_name: str | GpuModel) -> Profile:
    """The profile `name` of a GPU model: a full name ('1g.10gb', '3g.40gb', '1g.10gb+me') or a short form ('3g').

    A short form means the plain profile with that many compute slices and the least memory ('1g' on an H100 is
    1g.10gb, not 1g.20gb or 1g.10gb+me). Raises BadInput listing the valid names.
    STABLE API: the MPS mode calls resolve(name, model) to size MIG-like MPS slots.

    >>> resolve("1g", "A100-40GB").name
    '1g.5gb'
    """
    model = gpu_model(gpu_model_or_name)
    text = str(name).strip().lower()
    if text.startswith("mig "):
        text = text[4:].strip()
    for profile in model.profiles:
        if profile.name == text:
            return profile
    if re.fullmatch(r"\d+g", text):
        plain = [p for p in model.profiles if p.short == text and not p.media_extensions]
        if plain:
            return min(plain, key=lambda p: p.memory_slices)
    raise BadInput(
        f"MIG profile {name!r} does not exist on {model.name}; valid profiles: {', '.join(model.profile_names())} "
        f"(or short forms {', '.join(sorted({p.short for p in model.profiles}))})"
    )


MAX_COUNT = 64  # 'NxPROFILE' beyond this is refused at once (a GPU holds 7 instances; the planner explains 8 to 64)


def parse_layout(layout: str | list[str] | tuple[str, ...], gpu_model_or_name: str | GpuModel) -> list[Profile]:
    """A layout as profiles: a list, or a comma string; 'NxPROFILE' repeats ('3x2g,1g').

    >>> [p.name for p in parse_layout("3x2g,1g", "H100-80GB")]
    ['2g.20gb', '2g.20gb', '2g.20gb', '1g.10gb']
    """
    items = layout.split(",") if isinstance(layout, str) else list(layout)
    profiles: list[Profile] = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        match = re.fullmatch(r"(\d+)\s*[x*]\s*(\S+)", item)
        count, name = (int(match.group(1)), match.group(2)) if match else (1, item)
        if count > MAX_COUNT:
            assert match is not None  # a count other than 1 comes from the pattern
            raise BadInput(f"{item[:40]}: {match.group(1)[:20]} instances are far more than a GPU holds (at most 7 MIG "
                           "instances); give e.g. 7x1g or 3x2g,1g")
        profiles += [resolve(name, gpu_model_or_name)] * count
    if not profiles:
        raise BadInput("the MIG layout is empty; give profiles such as 3g.40gb,2g.20gb,1g.10gb or 7x1g")
    return profiles


def model_for_device(device_name: str) -> GpuModel | None:
    """The built-in model for an NVML device name ('NVIDIA H100 80GB HBM3'), or None if there is none."""
    for model in GPU_MODELS.values():
        if any(device_name.startswith(n) for n in model.nvml_names):
            return model
    return None
