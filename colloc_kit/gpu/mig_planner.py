"""Exact MIG layouts: where each GPU instance goes, or why a layout cannot exist and what comes close.

Placement rules are NVML's: an instance of a profile starts at one of the profile's placements (a memory slice)
and covers its memory slices; instances may not overlap, and their compute slices may not exceed the GPU's.
The search places the largest instances first (NVIDIA's advice: create larger instances before smaller ones,
so that small ones do not fragment the GPU), tries starts in ascending order and backtracks; it is deterministic.

    >>> p = plan("3g.40gb,2g.20gb,1g.10gb,1g.10gb", "H100-80GB")
    >>> [(i.profile.name, i.start, i.size) for i in p.instances]
    [('3g.40gb', 4, 4), ('2g.20gb', 0, 2), ('1g.10gb', 2, 1), ('1g.10gb', 3, 1)]
    >>> plan("4g,4g", "A100-40GB")
    Traceback (most recent call last):
    ...
    colloc_kit.gpu.mig_planner.ImpossibleLayout: MIG layout 4g.20gb + 4g.20gb does not fit on A100-40GB: ...
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from colloc_kit.errors import BadInput
from colloc_kit.gpu.mig_catalogue import GpuModel, Profile, gpu_model, parse_layout

MOST_INSTANCES = 7  # MIG instances a GPU holds at most (A100, H100, H200: 7 x 1g)

__all__ = ["ImpossibleLayout", "PlacedInstance", "Plan", "nearest_layouts", "plan", "propose_layouts", "summary"]


@dataclass(frozen=True)
class PlacedInstance:
    """One planned GPU instance: a profile at a start memory slice."""

    profile: Profile
    start: int

    @property
    def size(self) -> int:
        """The memory slices it covers, counted."""
        return self.profile.memory_slices

    @property
    def memory_range(self) -> range:
        """The memory slices it covers: `range(4, 8)` for a 3g at 4."""
        return range(self.start, self.start + self.size)

    def label(self) -> str:
        """'3g.40gb@4' (profile at its start memory slice)."""
        return f"{self.profile.name}@{self.start}"


@dataclass(frozen=True)
class Plan:
    """Placements for a layout, in the order the layout gave its profiles (instance i serves job i)."""

    gpu: GpuModel
    instances: tuple[PlacedInstance, ...]

    @property
    def compute_slices(self) -> int:
        """The compute slices the plan uses, all instances together.

        >>> plan("4g,2g,1g", "A100-40GB").compute_slices
        7
        """
        return sum(i.profile.compute_slices for i in self.instances)

    @property
    def memory_slices(self) -> int:
        """The memory slices the plan uses, all instances together (3g + 3g: all 8 of 8)."""
        return sum(i.size for i in self.instances)

    def layout(self, largest_first: bool = False) -> str:
        """The layout as a comma string of full profile names (in job order, or largest first)."""
        instances = self.creation_order() if largest_first else self.instances
        return ",".join(i.profile.name for i in instances)

    def creation_order(self) -> list[PlacedInstance]:
        """Largest first, the order apply creates instances in."""
        return sorted(self.instances, key=_size_key)

    def describe(self) -> str:
        """A table: one row per instance, with its memory slices drawn on the GPU's slice strip."""
        rows = [f"MIG layout on {self.gpu.name}: {self.compute_slices}/{self.gpu.compute_slices} compute slices, "
                f"{self.memory_slices}/{self.gpu.memory_slices} memory slices"]
        for n, inst in enumerate(self.instances):
            strip = "".join("#" if s in inst.memory_range else "." for s in range(self.gpu.memory_slices))
            p = inst.profile
            rows.append(f"  [{n}] {p.name:<11} start {inst.start} size {inst.size}  [{strip}]  "
                        f"{p.sm_count} SMs, {p.memory_mib} MiB, profile id {p.profile_id}")
        return "\n".join(rows)


class ImpossibleLayout(BadInput):
    """A layout that fits no placement; `reasons` say why and `suggestions` are close layouts that fit."""

    def __init__(self, message: str, reasons: list[str], suggestions: list[str]):
        super().__init__(message)
        self.reasons = reasons
        self.suggestions = suggestions


def plan(layout: Any, gpu: str | GpuModel, occupied: Iterable[tuple[int, int]] = (),
         occupied_compute: int = 0) -> Plan:
    """Place every profile of `layout` on `gpu`, or raise ImpossibleLayout with reasons and suggestions.

    `occupied` lists (start, size) memory ranges already taken by instances that stay, using
    `occupied_compute` compute slices.
    """
    model = gpu_model(gpu)
    profiles = parse_layout(layout, model)
    occupied = list(occupied)
    found = _search(profiles, model, occupied, occupied_compute)
    if found is not None:
        return found
    reasons = _reasons(profiles, model, occupied, occupied_compute)
    suggestions = [s.layout(largest_first=True) for s in nearest_layouts(profiles, model, occupied, occupied_compute)]
    message = f"MIG layout {summary(profiles)} does not fit on {model.name}: {'; '.join(reasons)}."
    if suggestions:
        message += " Valid layouts close to it: " + " | ".join(suggestions)
    raise ImpossibleLayout(message, reasons, suggestions)


def _size_key(item: Any) -> tuple:
    profile = item.profile if isinstance(item, PlacedInstance) else item
    return (-profile.memory_slices, -profile.compute_slices, profile.media_extensions, profile.name)


def _search(profiles: list[Profile], model: GpuModel, occupied: list[tuple[int, int]],
            occupied_compute: int) -> Plan | None:
    if not _counts_fit(profiles, model, occupied_compute):
        return None
    order = sorted(range(len(profiles)), key=lambda i: _size_key(profiles[i]))
    used = [False] * model.memory_slices
    for start, size in occupied:
        for s in range(start, start + size):
            used[s] = True
    starts: dict[int, int] = {}

    def place(k: int) -> bool:
        if k == len(order):
            return True
        index = order[k]
        profile = profiles[index]
        for start in profile.placements:
            cells = range(start, start + profile.memory_slices)
            if any(used[c] for c in cells):
                continue
            # identical profiles are interchangeable: keep their starts ascending to avoid re-trying permutations
            if k > 0 and profiles[order[k - 1]] == profile and start < starts[order[k - 1]]:
                continue
            for c in cells:
                used[c] = True
            starts[index] = start
            if place(k + 1):
                return True
            for c in cells:
                used[c] = False
        return False

    if not place(0):
        return None
    return Plan(model, tuple(PlacedInstance(p, starts[i]) for i, p in enumerate(profiles)))


def _counts_fit(profiles: list[Profile], model: GpuModel, occupied_compute: int = 0) -> bool:
    counts = Counter(profiles)
    return (all(n <= p.max_instances for p, n in counts.items())
            and sum(p.compute_slices for p in profiles) + occupied_compute <= model.compute_slices)


def _reasons(profiles: list[Profile], model: GpuModel, occupied: list[tuple[int, int]],
             occupied_compute: int) -> list[str]:
    names = summary(profiles)
    reasons = []
    for profile, n in sorted(Counter(profiles).items(), key=lambda item: _size_key(item[0])):
        if n > profile.max_instances:
            reasons.append(f"{n} x {profile.name} asked, {model.name} allows at most {profile.max_instances}")
    compute = sum(p.compute_slices for p in profiles)
    free_compute = model.compute_slices - occupied_compute
    if compute > free_compute:
        reasons.append(f"{names} needs {compute} compute slices; {model.name} has {free_compute}"
                       + (" free" if occupied_compute else ""))
    memory = sum(p.memory_slices for p in profiles)
    free_memory = model.memory_slices - sum(size for _, size in occupied)
    if memory > free_memory:
        parts = _memory_parts(profiles)
        reasons.append(f"{names} needs {memory} memory slices ({parts}); {model.name} has {free_memory}"
                       + (" free" if occupied else ""))
    if not reasons:
        allowed = ", ".join(f"{p.name} at {list(p.placements)} (covers {p.memory_slices})"
                            for p in sorted(set(profiles), key=_size_key))
        reasons.append(f"the slices add up but no placement fits them side by side (allowed starts: {allowed}"
                       + (f"; memory slices taken: {occupied}" if occupied else "") + ")")
    return reasons


def _memory_parts(profiles: list[Profile]) -> str:
    """Each instance's memory slices, one by one up to the most a GPU holds ('4g.40gb 4 + 1g.10gb 1'), beyond that
    counted per profile ('100 x 1g.10gb 1 each'), so that a layout of a hundred instances is one short line."""
    if len(profiles) <= MOST_INSTANCES:
        return " + ".join(f"{p.name} {p.memory_slices}" for p in sorted(profiles, key=_size_key))
    counts = sorted(Counter(profiles).items(), key=lambda item: _size_key(item[0]))
    return " + ".join(f"{n} x {p.name} {p.memory_slices} each" if n > 1 else f"{p.name} {p.memory_slices}"
                      for p, n in counts)


def summary(profiles: Sequence[Profile]) -> str:
    """'4g.40gb + 2g.20gb + 3 x 1g.10gb': largest first, runs of three or more counted."""
    parts = []
    for profile, n in sorted(Counter(profiles).items(), key=lambda item: _size_key(item[0])):
        parts += [f"{n} x {profile.name}"] if n >= 3 else [profile.name] * n
    return " + ".join(parts)


def nearest_layouts(profiles: Sequence[Profile], gpu: str | GpuModel, occupied: Iterable[tuple[int, int]] = (),
                    occupied_compute: int = 0, limit: int = 3) -> list[Plan]:
    """Valid layouts one change away (shrink one instance to a smaller profile, or drop one), else two changes.

    Ranked by the compute slices they keep, then memory slices; deterministic.
    """
    model = gpu_model(gpu)
    occupied = list(occupied)
    frontier = [list(profiles)]
    for _ in range(2):
        candidates: dict[tuple[str, ...], list[Profile]] = {}
        for layout in frontier:
            for variant in _one_change(layout, model):
                candidates.setdefault(tuple(sorted(p.name for p in variant)), variant)
        plans = [p for p in (_search(v, model, occupied, occupied_compute) for v in candidates.values()) if p]
        if plans:
            plans.sort(key=lambda p: (-p.compute_slices, -p.memory_slices, p.layout()))
            return plans[:limit]
        frontier = list(candidates.values())
    return []


def _one_change(layout: list[Profile], model: GpuModel) -> Iterable[list[Profile]]:
    plain = sorted((p for p in model.profiles if not p.media_extensions), key=_size_key)
    for i, profile in enumerate(layout):
        rest = layout[:i] + layout[i + 1:]
        if rest:
            yield rest
        for smaller in plain:
            if (smaller.compute_slices, smaller.memory_slices) < (profile.compute_slices, profile.memory_slices) \
                    and smaller.compute_slices <= profile.compute_slices \
                    and smaller.memory_slices <= profile.memory_slices:
                yield layout[:i] + [smaller] + layout[i + 1:]


def propose_layouts(jobs_memory_mb: Sequence[float], gpu: str | GpuModel, headroom_mib: int = 1024,
                    limit: int = 5) -> list[Plan]:
    """Layouts that give each job (in order) its own instance with enough memory, best first.

    `jobs_memory_mb` are the jobs' peak memory needs in MiB (e.g. measured peak allocated memory of earlier runs);
    `headroom_mib` is added to each for the CUDA context and allocator slack. Plans are ranked by the compute
    slices they hand out (more is faster), then by fewer memory slices (more room left), then by giving the
    larger instances to the jobs that need more memory. Raises BadInput when
    no layout fits, saying which job is too large or that there are too many jobs.

    >>> [p.layout() for p in propose_layouts([3300, 1000], "H100-80GB", limit=2)]
    ['4g.40gb,3g.40gb', '3g.40gb,4g.40gb']
    """
    model = gpu_model(gpu)
    needs = [float(m) + headroom_mib for m in jobs_memory_mb]
    if not needs:
        raise BadInput("propose_layouts needs at least one job's memory need")
    plain = sorted((p for p in model.profiles if not p.media_extensions),
                   key=lambda p: (p.memory_mib, p.compute_slices))
    choices = []
    for n, need in enumerate(needs):
        fitting = [p for p in plain if p.memory_mib >= need]
        if not fitting:
            largest = max(p.memory_mib for p in plain)
            raise BadInput(f"job {n} needs {need:.0f} MiB (with {headroom_mib} MiB headroom); the largest MIG "
                           f"instance on {model.name} has {largest} MiB: run it without MIG or shrink its batch")
        choices.append(fitting)
    if len(needs) > model.compute_slices:
        raise BadInput(f"{len(needs)} jobs need {len(needs)} MIG instances; {model.name} has at most "
                       f"{model.compute_slices} (one per compute slice): use MPS or MPS inside MIG instances")
    plans: dict[tuple[str, ...], Plan] = {}

    def choose(k: int, picked: list[Profile], compute: int) -> None:
        if k == len(needs):
            found = _search(picked, model, [], 0)
            if found:
                plans.setdefault(tuple(p.name for p in picked), found)
            return
        for profile in choices[k]:
            if compute + profile.compute_slices + (len(needs) - k - 1) <= model.compute_slices:
                choose(k + 1, picked + [profile], compute + profile.compute_slices)

    choose(0, [], 0)
    if not plans:
        raise BadInput(f"no MIG layout on {model.name} gives each of the {len(needs)} jobs an instance with enough "
                       f"memory ({', '.join(f'{n:.0f}' for n in needs)} MiB with headroom); use MPS or fewer jobs")
    def rank(p: Plan) -> tuple:
        matched = sum(need * inst.profile.compute_slices for need, inst in zip(needs, p.instances))
        return (-p.compute_slices, p.memory_slices, -matched, p.layout())

    ranked = sorted(plans.values(), key=rank)
    return ranked[:limit]
