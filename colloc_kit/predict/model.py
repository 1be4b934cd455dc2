"""Predict before you run: a mix's throughput under each sharing mode from one lone run per workload.

A transparent model. Each job's lone run says how much of each shared resource it used per second alone: the
GPU's time (`gpu_busy`, 1 - idle share), its SMs (`sm_active`, GPM SM activity), DRAM bandwidth (`dram`), its
host cores (input-bound jobs saturate their core block). When jobs share, each limit's *load* X is what the jobs
ask of it over what it offers:

- naive time-slicing: one context at a time, so the GPU's busy shares add up: X = sum(gpu_busy) / naive_efficiency
  (the time lost to context switches, fitted);
- MPS: kernels of all jobs overlap, so SM activity adds up: X = sum(sm_active) / mps_capacity (fitted: SMs that
  one job leaves partly filled take a second job's blocks too); DRAM adds up against 1;
- MPS partitions (thread limits shaped like MIG) and MIG: a job gets a share p of the SMs: X = sm_active / p /
  partition_capacity (fitted); MIG also gives it a share of the memory bandwidth and memory;
- the host: a job that waited for input alone had its core block saturated; sharing the host's cores among N
  jobs gives it min(4, cores // N): X = cores alone / cores now, and its pipeline delivers min(1, 1/X) of its lone
  rate (its own pipeline: no queueing with others).

A job runs at its lone rate times f = g(X) for the tightest shared or partition limit, where g(x) = (1 + x^k)^(-1/k)
is a smooth minimum of 1 and 1/x (k, the sharpness, fitted): far below a limit a job runs as alone, far above it
the jobs share it, and near it they queue. The gain is the kit's normalized throughput: the sum of each job's rate
over its lone rate.
Memory must fit first (steady footprint alone, `figures.MEMORY_MARGIN` kept free), else nothing is predicted.

    >>> lone = LoneProfile("r26", images_per_s=1500.0, gpu_busy=0.58, sm_active=0.49, dram=0.34,
    ...                    input_wait=0.68, memory_mb=10094.0)
    >>> p = predict(Config("mps", ("r26", "r26")), {"r26": lone})
    >>> round(p.gain, 2), p.binding
    (1.82, 'SMs (MPS)')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from colloc_kit.analysis import figures
from colloc_kit.errors import BadInput
from colloc_kit.gpu.mig_catalogue import GpuModel, Profile, gpu_model, resolve
from colloc_kit.modes.mps import partition_share

__all__ = ["MODES", "LoneProfile", "Target", "Calibration", "CALIBRATION", "H100", "Config", "JobPrediction",
           "Prediction", "predict", "smooth_min"]

MODES = ("naive", "mps", "partitions", "mig")  # partitions: MPS thread and memory limits shaped like MIG profiles
NEAR_LONE = 0.97  # a job at this share of its lone rate or more is "as alone": its own limit binds
HOST = "host cores and input pipeline"  # its own: the pipeline's capacity scales with its cores, factor min(1, 1/x)
SM_LIMIT = {"naive": "GPU time slices", "mps": "SMs (MPS)", "partitions": "SMs of its partition",
            "mig": "SMs of its MIG instance"}


@dataclass(frozen=True)
class LoneProfile:
    """What one lone run of a workload measured (shares are 0-1; None where not measured).

    `job` holds the JobSpec fields that make the workload again (what `advise --confirm` runs)."""

    workload: str
    images_per_s: float
    gpu_busy: float | None = None  # 1 - the share of time the GPU ran no kernel
    sm_active: float | None = None  # GPM SM activity (fraction of SM-time with a warp resident)
    dram: float | None = None  # DRAM bandwidth utilisation
    input_wait: float | None = None  # share of the job's time spent waiting for its next batch
    memory_mb: float | None = None  # steady device memory (NVML, CUDA context included)
    device: str = "cuda"
    sm_occupancy: float | None = None
    experiment: str | None = None
    job: Mapping = field(default_factory=dict, compare=False)

    @property
    def input_bound(self) -> bool:
        """It waited for its input pipeline at least `figures.INPUT_BOUND_SHARE` of its time alone."""
        return self.input_wait is not None and self.input_wait >= figures.INPUT_BOUND_SHARE

    @property
    def sm_demand(self) -> float | None:
        """SM activity alone, or the GPU's busy share where GPM was not read (a coarser figure)."""
        return self.sm_active if self.sm_active is not None else self.gpu_busy


@dataclass(frozen=True)
class Target:
    """The machine predicted for: its GPU's MIG shape, memory and the host's cores (the kit's core blocks)."""

    gpu: str = "H100-80GB"
    memory_mib: int = 81559
    host_cores: int = 16
    job_cores: int = 4  # a GPU job's core block at most, as the shipped reference data ran (kit 0.x's pinned blocks)

    @property
    def model(self) -> GpuModel:
        """The MIG profile table of the GPU."""
        return gpu_model(self.gpu)

    def cores(self, n_jobs: int, device: str = "cuda") -> int:
        """Cores of one job's block when n_jobs run at once (as the launcher splits them)."""
        size = max(1, self.host_cores // max(1, n_jobs))
        return min(size, self.job_cores) if device == "cuda" else size


H100 = Target()


@dataclass(frozen=True)
class Calibration:
    """The model's constants; `fitted_on` says where they come from (`predict_check.fit` recomputes them)."""

    naive_efficiency: float = 0.90
    mps_capacity: float = 1.0
    partition_capacity: float = 1.0
    sharpness: float = 4.0
    fitted_on: str = "not fitted"


# fitted by predict_check.fit on the collocated cells of seed-33 (h100-80gb) only; tests/test_predict.py holds
# these values to a fresh fit, and benchmarks/predict/predict_validation.py reports the error on every other experiment
CALIBRATION = Calibration(naive_efficiency=0.93, mps_capacity=1.03, partition_capacity=1.09, sharpness=6.0,
                          fitted_on="seed-33 (41 collocated cells)")


@dataclass(frozen=True)
class Config:
    """A configuration to predict: a mode, one workload name per job and, for partitions and MIG, one profile each
    (short names such as '3g' or MIG names such as '3g.40gb')."""

    mode: str
    jobs: tuple[str, ...]
    layout: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        if self.layout is not None:
            object.__setattr__(self, "layout", tuple(self.layout))
        if self.mode not in MODES:
            raise BadInput(f"mode {self.mode!r}: the model predicts {', '.join(MODES)}")
        if not self.jobs:
            raise BadInput("a configuration needs at least one job")
        if (self.mode in ("partitions", "mig")) != (self.layout is not None):
            raise BadInput(f"mode {self.mode}: " + ("give one profile per job, e.g. layout=('3g', '3g')"
                                                     if self.layout is None else "takes no layout"))
        if self.layout is not None and len(self.layout) != len(self.jobs):
            raise BadInput(f"layout {'+'.join(self.layout)} has {len(self.layout)} profiles for {len(self.jobs)} "
                           "jobs: give one per job")

    @property
    def label(self) -> str:
        """e.g. 'mps', 'partitions 3g+3g', 'mig 4g.40gb+2g.20gb'."""
        return self.mode + (f" {'+'.join(self.layout)}" if self.layout else "")

    @property
    def mix(self) -> str:
        """The jobs, e.g. '2 x r26 + r50'."""
        counts = {w: self.jobs.count(w) for w in dict.fromkeys(self.jobs)}
        return " + ".join(f"{n} x {w}" if n > 1 else w for w, n in counts.items())


@dataclass(frozen=True)
class JobPrediction:
    """One job of a prediction: its rate, its share of its lone rate, and the limit that sets it."""

    workload: str
    images_per_s: float
    relative: float
    limit: str
    partition: str | None = None


@dataclass(frozen=True)
class Prediction:
    """A configuration's predicted aggregate, gain (normalized throughput), fit, binding limit and reasoning."""

    config: Config
    jobs: tuple[JobPrediction, ...]
    gain: float
    aggregate_images_per_s: float
    fits: bool
    binding: str
    reasoning: tuple[str, ...]

    def explain(self) -> str:
        """The arithmetic in words, one step a line."""
        return "\n".join(self.reasoning)


def smooth_min(x: float, k: float) -> float:
    """g(x) = (1 + x^k)^(-1/k): about 1 for x << 1, about 1/x for x >> 1.

    >>> round(smooth_min(0.1, 4), 3), round(smooth_min(4.0, 4), 3)
    (1.0, 0.25)
    """
    return (1.0 + max(x, 0.0) ** k) ** (-1.0 / k)


def predict(config: Config, profiles: Mapping[str, LoneProfile], target: Target = H100,
            calibration: Calibration = CALIBRATION) -> Prediction:
    """Predict `config` from the lone `profiles` (workload name -> LoneProfile); BadInput for a job without one."""
    missing = sorted(set(config.jobs) - set(profiles))
    if missing:
        raise BadInput(f"no lone run of {', '.join(missing)}: run it alone first (mode exclusive, copies 1) or name "
                       f"one of the workloads with a lone run: {', '.join(sorted(profiles)) or 'none'}")
    lone = [profiles[w] for w in config.jobs]
    if config.mode != "naive" and any(p.device != "cuda" for p in lone):
        raise BadInput(f"mode {config.mode} needs a GPU; a CPU job shares its host only under naive")
    shares = _shares(config, target)
    fit, why = _memory(config, lone, shares, target)
    head = [f"{config.mix} under {config.label} on {target.gpu} ({target.host_cores} host cores):"]
    if not fit:
        return Prediction(config, (), math.nan, math.nan, False, "memory", tuple(head + why))
    reasoning, jobs = head + why, []
    shared = _shared_loads(config, lone, calibration)
    reasoning += [line for *_, line in shared]
    lines: dict[str, list[int]] = {}
    for i, p in enumerate(lone):
        limits = [(name, x) for name, x, _ in shared] + _own_loads(config, p, shares[i], target, calibration)
        factors = {name: min(1.0, 1.0 / x) if name == HOST else smooth_min(x, calibration.sharpness)
                   for name, x in limits}
        name, factor = min(factors.items(), key=lambda kv: kv[1]) if factors else ("as alone", 1.0)
        limit = name if factor < NEAR_LONE else f"as alone ({_lone_limit(p)})"
        jobs.append(JobPrediction(p.workload, p.images_per_s * factor, factor, limit, shares[i].label))
        label = shares[i].label
        line = (f"{p.workload}{', ' + label if label else ''}: "
                + "; ".join(f"{n} load {x:.2f} -> x{factors[n]:.2f}" for n, x in limits)
                + f"; so {p.images_per_s:,.0f} x {factor:.2f} = {p.images_per_s * factor:,.0f} img/s ({limit})")
        lines.setdefault(line, []).append(i)
    reasoning += [f"- job{'s' if len(ix) > 1 else ''} {','.join(map(str, ix))} ({line}" for line, ix in lines.items()]
    reasoning.append(f"each job runs at its lone rate x g(load of its tightest limit), g(x) = (1 + x^k)^(-1/k), "
                     f"k = {calibration.sharpness:g}")
    gain = sum(j.relative for j in jobs)
    binding = _binding(jobs)
    reasoning.append(f"gain = sum of each job's share of its lone rate = {gain:.2f}; aggregate "
                     f"{sum(j.images_per_s for j in jobs):,.0f} img/s; binding limit: {binding}")
    return Prediction(config, tuple(jobs), gain, sum(j.images_per_s for j in jobs), True, binding, tuple(reasoning))


@dataclass(frozen=True)
class _Share:
    sm: float = 1.0  # share of the SMs
    dram: float = 1.0  # share of the DRAM bandwidth (MIG only)
    memory_mib: float | None = None  # a memory limit of its own
    label: str | None = None


def _shares(config: Config, target: Target) -> list[_Share]:
    if config.layout is None:
        return [_Share() for _ in config.jobs]
    model, out = target.model, []
    for name in config.layout:
        profile: Profile = resolve(name, model.name)
        if config.mode == "partitions":
            percent, memory = partition_share(profile, model, target.memory_mib)
            out.append(_Share(percent / 100, 1.0, memory, f"{profile.short} partition: {percent} % of SMs"))
        else:
            out.append(_Share(profile.sm_count / model.sm_count, profile.memory_slices / model.memory_slices,
                              profile.memory_mib, f"MIG {profile.name}: {profile.sm_count} of {model.sm_count} SMs"))
    return out


def _memory(config: Config, lone: Sequence[LoneProfile], shares: Sequence[_Share],
            target: Target) -> tuple[bool, list[str]]:
    """(fits, the arithmetic in words)."""
    need = [p.memory_mb for p in lone if p.memory_mb is not None and p.memory_mb == p.memory_mb]  # not NaN
    if len(need) < len(lone):
        return True, ["memory: a job's steady footprint was not measured; fit not checked"]
    if config.layout is not None:
        for p, share in zip(lone, shares):
            assert share.memory_mib is not None  # a layout gives every share its memory
            if not figures.copies_fit(share.memory_mib, p.memory_mb):
                return False, [f"memory: {p.workload} needs {p.memory_mb:,.0f} MiB alone; its {share.label} holds "
                               f"{share.memory_mib:,.0f} MiB, {figures.MEMORY_MARGIN:.0%} kept free: does not fit"]
        return True, ["memory: each job fits its own share"]
    total, room = sum(need), target.memory_mib * (1 - figures.MEMORY_MARGIN)
    fits = total <= room
    return fits, [f"memory: the jobs need {' + '.join(f'{m:,.0f}' for m in need)} = {total:,.0f} MiB of "
                  f"{room:,.0f} usable ({figures.MEMORY_MARGIN:.0%} of {target.memory_mib:,} kept free): "
                  + ("fits" if fits else "does not fit")]


def _shared_loads(config: Config, lone: Sequence[LoneProfile], cal: Calibration) -> list[tuple[str, float, str]]:
    """[(limit, load, words)] of the limits all jobs share."""
    if any(p.device != "cuda" for p in lone):
        return []
    out = []
    if config.mode == "naive":
        busy = [p.gpu_busy if p.gpu_busy is not None else 1.0 for p in lone]
        usable = cal.naive_efficiency if len(busy) > 1 else 1.0
        x = sum(busy) / usable
        out.append((SM_LIMIT["naive"], x,
                    f"GPU time slices: busy shares {' + '.join(f'{b:.2f}' for b in busy)} = {sum(busy):.2f}, over "
                    f"{usable:.2f} of the time usable (context switches) = load {x:.2f}"))
        return out
    if config.mode == "mps":
        sm = [p.sm_demand if p.sm_demand is not None else 1.0 for p in lone]
        x = sum(sm) / cal.mps_capacity
        out.append((SM_LIMIT["mps"], x,
                    f"SMs: activity alone {' + '.join(f'{s:.2f}' for s in sm)} = {sum(sm):.2f}, over "
                    f"{cal.mps_capacity:.2f} (overlap in partly filled SMs) = load {x:.2f}"))
    if config.mode in ("mps", "partitions"):
        dram = [p.dram if p.dram is not None else 0.0 for p in lone]
        if any(dram):
            out.append(("DRAM bandwidth", sum(dram),
                        f"DRAM bandwidth (shared): {' + '.join(f'{d:.2f}' for d in dram)} = load {sum(dram):.2f}"))
    return out


def _own_loads(config: Config, p: LoneProfile, share: _Share, target: Target,
               cal: Calibration) -> list[tuple[str, float]]:
    """[(limit, load)] of one job's own limits: its partition, its host cores."""
    out = []
    if config.layout is not None and p.sm_demand is not None:
        out.append((SM_LIMIT[config.mode], p.sm_demand / share.sm / cal.partition_capacity))
    if config.mode == "mig" and p.dram is not None:
        out.append(("DRAM bandwidth of its instance", p.dram / share.dram))
    alone, now = target.cores(1, p.device), target.cores(len(config.jobs), p.device)
    if p.input_bound or p.device != "cuda":
        out.append((HOST, alone / now))
    return out


def _lone_limit(p: LoneProfile) -> str:
    if p.device != "cuda":
        return "its CPU"
    return "its input pipeline" if p.input_bound else "its own pace"


def _binding(jobs: Sequence[JobPrediction]) -> str:
    """The limit that slows the jobs most (weighted by how much each loses)."""
    loss: dict[str, float] = {}
    for j in jobs:
        loss[j.limit] = loss.get(j.limit, 0.0) + (1.0 - j.relative) + 1e-9
    return max(loss, key=loss.__getitem__)


def with_calibration(calibration: Calibration, **changes: Any) -> Calibration:
    """A copy with some constants changed (what `predict_check.fit` searches over). Any: the fields are named at
    run time (floats, and `fitted_on` a str)."""
    return replace(calibration, **changes)
