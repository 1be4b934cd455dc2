"""The seed study's experiments 33-37 as the kit runs them on the GPU present (../shared/SEED_ARTIFACT.md).

The study's artifact (`collocation_experiment.csv`) gives each model and dataset of experiments 33-36 thirteen
workloads: 1 copy exclusive, on MIG 7g and 4g, as an MPS client; 2 copies naive, on 2 x 3g, under MPS; 3 copies
naive, on 3 x 2g, under MPS; 7 copies naive, on 7 x 1g, under MPS. Experiment 37 runs mixes of ResNet-152, -50 and
-26 naive, under MPS and on MIG (152 on 4g, 50 on 2g, 26 on 1g). Every job trains a timm model with the study's
recipe (`recipe: seed`: 224 px, fp32 unless `amp` says otherwise, 4 loader workers).

A MIG row runs as MIG where the GPU has MIG enabled, else as MPS partitions of the same slice shapes ("MPS partition
(not MIG)": SM and memory limits only, no isolation of caches, bandwidth or faults). Beside each, the planner gives
the exact MIG layout on this card's profiles, or why it cannot exist (some of 37's mixes need 8 or 9 slices of 7).
`seed_run.run` runs the cells.

Data: DATA_ROOT/cifar10, DATA_ROOT/imagenet64 and DATA_ROOT/imagenet, each a folder of class folders of image
files, as the study read them (`colloc-kit data make NAME --root DATA_ROOT` writes stand-ins in that layout).

    colloc-kit run seed-33 --plan                         # the cells, how each runs here, an estimated time
    colloc-kit run seed-33 --data-root seed-data          # again later: only the missing or failed cells run

    >>> [row["runs_as"] for row in plan_rows(SeedSpec(33), Card.planned("H100-80GB"))][:4]
    ['exclusive', 'MPS partition (not MIG): 7g', 'MPS partition (not MIG): 4g', 'mps']
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from colloc_kit.errors import BadInput
from colloc_kit.gpu.mig_catalogue import GpuModel, gpu_model, model_for_device
from colloc_kit.gpu.mig_planner import ImpossibleLayout, plan
from colloc_kit.machine import gpu_list
from colloc_kit.spec import AMP_CHOICES, ExperimentSpec, ModeSpec
from colloc_kit.spec.baselines import BASELINES, SEED_PRECISION, baseline_keys

__all__ = ["BATCH", "Card", "DATASETS", "MIXES", "MIX_MODELS", "MODELS", "PARTITION_LABEL", "PLANNED_CARD",
           "RUN_OVERHEAD_S", "SOLO_COPIES", "SOLO_SLICES", "SeedCell", "SeedSpec", "WARM_OVERHEAD_S", "experiments",
           "lanes", "plan_rows", "seed_cells"]

MODELS = {33: ("timm.resnet26", "timm.resnet50", "timm.resnet152"), 34: ("timm.resnet26", "timm.resnet50",
          "timm.resnet152"), 35: ("timm.cait_xxs24_224",) * 3, 36: ("timm.efficientnetv2_s",) * 3}
DATASETS = ("cifar10", "imagenet64", "imagenet")  # experiments 33-36: the i-th model trains on the i-th dataset
BATCH = {33: 128, 34: 32, 35: 128, 36: 128}
SOLO_COPIES: tuple[int, ...] = (1, 2, 3, 7)
SOLO_SLICES: dict[int, tuple[str, ...]] = {1: ("7g", "4g"), 2: ("3g",), 3: ("2g",), 7: ("1g",)}  # MIG: per copy
MIX_MODELS: dict[str, tuple[str, str, int, str]] = {  # experiment 37: (model, dataset, batch, MIG slice)
    "R152": ("timm.resnet152", "imagenet", 32, "4g"), "R50": ("timm.resnet50", "imagenet64", 128, "2g"),
    "R26": ("timm.resnet26", "cifar10", 128, "1g")}
MIXES = {("R26", "R50"): ((1, 1), (2, 1), (1, 2), (3, 1), (2, 2), (1, 3)),
         ("R152", "R26"): ((1, 1), (1, 2), (1, 3)), ("R152", "R50"): ((1, 1), (1, 2)),
         ("R152", "R50", "R26"): ((1, 1, 1), (1, 1, 2), (1, 1, 3))}
PARTITION_LABEL = "MPS partition (not MIG)"
PLANNED_CARD = "H100-80GB"  # the card --plan assumes on a machine without a GPU
WARM_OVERHEAD_S = 1.3  # a warm repeat's later window beyond its window, without runs to measure it from: the median
                       # of seed-33 fp32's ResNet-26 third on two H200s (benchmarks/results/h200/issue50/README.md)
RUN_OVERHEAD_S = 8.8  # a cell's wall time beyond its window where the experiment's folder has no runs to measure
                      # it from: the median of seed-33 fp32's first 56 cells on the H100 with lanes, 15 s windows
                      # (benchmarks/scaling/results/h100-cell-phases/seed33-cells.csv)


@dataclass(frozen=True)
class SeedSpec:
    """Which seed experiment to run, and how long each job measures. A bundled `seed-NN.yaml` holds one."""

    seed: int
    amp: tuple[str, ...] = ("off",)
    data_root: str = "seed-data"
    seconds: float = 10.0  # each window (with until_ci: the most); 10 s: benchmarks/archive/window_replay.py, H100 set
    until_ci: float | None = None  # a window ends once its images/s 95 % CI is this tight (JobSpec.until_ci)
    min_seconds: float = 10.0
    warmup_steps: int = 10
    repeats: int = 3
    name: str | None = None
    gpu: int = 0
    gpus: list[int] | str | None = None  # cells spread over these GPUs, a lane each (ExperimentSpec.gpus)
    placement: str = "unpinned"  # as the study ran its jobs: no affinity (ExperimentSpec.placement)
    monitor_interval_s: float = 0.15
    mlflow: str | None = None  # also log each cell to this MLflow tracking URI
    warm_repeats: bool = False  # a cell's repeats as windows of one launch (ExperimentSpec.warm_repeats)
    feed_swaps: bool = False  # a GPU-only twin on its cell's launch, its feed swapped (ExperimentSpec.feed_swaps)
    baselines: tuple[str, ...] = BASELINES  # every gain split into the GPU's and the host's part (docs/attribution.md)
    baseline_precision: dict = field(default_factory=lambda: dict(SEED_PRECISION))  # +-5 % / +-9 % (issue 38)
    baseline_max_repeats: int = 16  # the most lone runs of one baseline to reach its target (a loader-bound one swings
    # with the host by 10-18 % from run to run on a lent H200 host: 8-16 runs, issue 50)
    cell_precision: float | None = 0.04  # a collocated cell's own: inside the study's gain's +-10 % beside the
    # configured baseline's +-9 %, and the GPU's part's +-5 % beside a host-matched one within +-3 %
    cell_max_repeats: int = 8  # a loader-bound ResNet-26 x2 swung 3.5 % (CV) over three windows on two H200s: 6 runs

    def __post_init__(self) -> None:
        if self.seed not in (*MODELS, 37):
            raise BadInput(f"seed: the study's experiments are 33, 34, 35, 36 and 37, got {self.seed!r}")
        amps = tuple(a.strip() for a in self.amp.split(",")) if isinstance(self.amp, str) else tuple(self.amp)
        if not amps or any(a not in AMP_CHOICES for a in amps):
            raise BadInput(f"amp must be one or a list of {', '.join(AMP_CHOICES)} (off is the study's fp32), "
                           f"got {self.amp!r:.60}")
        object.__setattr__(self, "amp", amps)
        if not isinstance(self.data_root, str) or not self.data_root:
            raise BadInput(f"seed spec: data_root must be a folder path, got {self.data_root!r:.60}")
        try:  # the other keys as the experiments will hold them: checked by the one spec schema, now
            ExperimentSpec.from_mapping({"name": self.experiment, "repeats": self.repeats, "gpu": self.gpu,
                                         "monitor_interval_s": self.monitor_interval_s, **baseline_keys(self),
                                         "cell_precision": self.cell_precision,
                                         "cell_max_repeats": self.cell_max_repeats,
                                         "jobs": [_job(self, MODELS[33][0], DATASETS[0], BATCH[33], amps[0])]})
        except BadInput as exc:
            raise BadInput(f"seed spec: {str(exc).removeprefix('jobs[0]: ')}") from None

    @property
    def experiment(self) -> str:
        """The experiment folder's name: the spec's own, else `seed-<number>`."""
        return self.name or f"seed-{self.seed}"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "SeedSpec":
        """From a YAML mapping with a `seed:` key; unknown keys are refused with the valid ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BadInput(f"seed spec: unknown key(s) {', '.join(map(str, unknown))}; valid keys: "
                           f"{', '.join(sorted(known))}")
        return cls(**dict(data))


@dataclass(frozen=True)
class Card:
    """The GPU the cells are planned for: its MIG profiles, and whether MIG is enabled on it."""

    model: GpuModel
    mig_enabled: bool
    memory_mib: int
    note: str = ""
    on_this_machine: bool = False  # False: planned from a built-in table (no such GPU here), nothing runs as planned

    @classmethod
    def here(cls, gpu: int = 0) -> "Card":
        """This machine's GPU `gpu` (read-only NVML), or the H100 80GB where there is none."""
        gpus, reason = gpu_list()
        card = next((g for g in gpus if g["index"] == gpu), None)
        if card is None:
            return cls.planned(PLANNED_CARD, f"no GPU {gpu} here ({reason or 'not found'}): planned for {PLANNED_CARD}")
        model = model_for_device(card["name"])
        mig = bool((card.get("mig_mode") or {}).get("current"))
        if model is None:
            return cls(gpu_model(PLANNED_CARD), mig, card["memory_mb"], f"{card['name']} has no built-in MIG "
                                                                        f"table: slices of {PLANNED_CARD}", True)
        return cls(model, mig, card["memory_mb"], card["name"], True)

    @classmethod
    def planned(cls, name: str, note: str = "") -> "Card":
        """A card planned from the built-in MIG table of `name`, not seen on this machine.

        >>> Card.planned("H100-80GB").note
        'planned for H100-80GB'
        """
        model = gpu_model(name)
        return cls(model, False, model.total_memory_mib, note or f"planned for {name}")


@dataclass
class SeedCell:
    """One row of the study's matrix as it runs here: the spec that holds it and its mode, or why it cannot run."""

    workload: str
    artifact: str
    runs_as: str
    mig_layout: str
    jobs: list[dict]
    mode: ModeSpec | None
    copies: int
    amp: str
    notes: list[str] = field(default_factory=list)


def seed_cells(seed: SeedSpec, card: Card) -> list[SeedCell]:
    """Every row of experiment `seed.seed` for each precision, in run order (lone rows first for each workload)."""
    return [cell for amp in seed.amp for cell in (_mix_cells(seed, card, amp) if seed.seed == 37
                                                   else _solo_cells(seed, card, amp))]


def experiments(seed: SeedSpec, card: Card) -> list[ExperimentSpec]:
    """The runnable cells as experiment specs, all named `seed.experiment` (one folder), grouped by their jobs."""
    groups: dict[str, tuple[list[dict], dict[int, list[ModeSpec]]]] = {}
    for cell in seed_cells(seed, card):
        if cell.mode is None:
            continue
        key = repr(cell.jobs)
        jobs, by_copies = groups.setdefault(key, (cell.jobs, {}))
        by_copies.setdefault(cell.copies, []).append(cell.mode)
    return [ExperimentSpec.from_mapping({
        "name": seed.experiment, "jobs": jobs, "copies": [copies], "repeats": seed.repeats, "gpu": seed.gpu,
        "gpus": seed.gpus, "placement": seed.placement, "monitor_interval_s": seed.monitor_interval_s,
        "mlflow": seed.mlflow, "warm_repeats": seed.warm_repeats,
        "feed_swaps": seed.feed_swaps, **baseline_keys(seed), "cell_precision": seed.cell_precision,
        "cell_max_repeats": seed.cell_max_repeats,
        "modes": [{"name": m.name, **m.options} for m in modes]})
        for jobs, by_copies in groups.values() for copies, modes in by_copies.items()]


def plan_rows(seed: SeedSpec, card: Card) -> list[dict]:
    """One plain row per cell: the artifact's row, how it runs here, the exact MIG layout (the time they take:
    `cli.plans.seed_seconds`)."""
    return [{"workload": c.workload, "amp": c.amp, "artifact": c.artifact, "runs_as": c.runs_as,
             "mig_layout_here": c.mig_layout, "runs": c.mode is not None, "notes": "; ".join(c.notes)}
            for c in seed_cells(seed, card)]


def _job(seed: SeedSpec, model: str, dataset: str, batch: int, amp: str, index: int = 0) -> dict:
    return {"model": model, "dataset": "imagefolder", "data_root": f"{seed.data_root}/{dataset}", "batch_size": batch,
            "amp": amp, "recipe": "seed", "seconds": seed.seconds, "until_ci": seed.until_ci,
            "min_seconds": seed.min_seconds, "warmup_steps": seed.warmup_steps, "seed": index}


def _partition(card: Card, slices: list[str]) -> tuple[ModeSpec | None, str, str]:
    """(mode or None, how it runs here, the exact MIG layout or why none exists) for jobs on these MIG slices."""
    try:
        placed = plan(slices, card.model)
    except ImpossibleLayout as exc:
        return None, "cannot be placed", f"impossible on {card.model.name}: {'; '.join(exc.reasons)}"
    layout = " + ".join(i.label() for i in placed.instances)
    names = [i.profile.name for i in placed.instances]
    if card.mig_enabled:
        return ModeSpec("mig", {"layout": names}), f"MIG: {' + '.join(names)}", layout
    return ModeSpec("mps", {"partitions": list(slices)}), f"{PARTITION_LABEL}: {_count_label(slices)}", layout


def _count_label(slices: list[str]) -> str:
    return f"{len(slices)} x {slices[0]}" if len(slices) > 1 and len(set(slices)) == 1 else " + ".join(slices)


def _artifact_profile(slice_: str) -> str:
    return {"7g": "7g.40gb", "4g": "4g.20gb", "3g": "3g.20gb", "2g": "2g.10gb", "1g": "1g.5gb"}[slice_]


def _solo_cells(seed: SeedSpec, card: Card, amp: str) -> list[SeedCell]:
    cells = []
    for model, dataset in zip(MODELS[seed.seed], DATASETS):
        jobs = [_job(seed, model, dataset, BATCH[seed.seed], amp)]
        workload = f"{model.removeprefix('timm.')} on {dataset}, batch {BATCH[seed.seed]}"
        for copies in SOLO_COPIES:
            plain = ("exclusive", "mps") if copies == 1 else ("naive", "mps")
            rows: list[tuple[ModeSpec | None, str, str, str]] = [(ModeSpec(plain[0]), f"{copies} x {plain[0]}",
                                                                  plain[0], "")]
            for slice_ in SOLO_SLICES[copies]:
                mode, runs_as, layout = _partition(card, [slice_] * copies)
                rows.append((mode, f"{copies} x {_artifact_profile(slice_)}", runs_as, layout))
            rows.append((ModeSpec(plain[1]), f"{copies} x MPS", plain[1], ""))
            cells += [SeedCell(workload, artifact, runs_as, layout, jobs, mode, copies, amp)
                      for mode, artifact, runs_as, layout in rows]
    return cells


def _mix_cells(seed: SeedSpec, card: Card, amp: str) -> list[SeedCell]:
    cells = [SeedCell(f"{name} alone", "(not in the artifact: the gains' baseline)", "exclusive", "",
                      [_job(seed, *MIX_MODELS[name][:3], amp)], ModeSpec("exclusive"), 1, amp,
                      ["the baseline of every mix with it; each mix also runs it alone with the mix's loader workers"])
             for name in ("R152", "R50", "R26")]
    for names, counts_list in MIXES.items():
        for counts in counts_list:
            members = [name for name, n in zip(names, counts) for _ in range(n)]
            jobs = [_job(seed, *MIX_MODELS[name][:3], amp, index=i) for i, name in enumerate(members)]
            workload = " + ".join(names) + " as " + "+".join(map(str, counts))
            slices = [MIX_MODELS[name][3] for name in members]
            mode, runs_as, layout = _partition(card, slices)
            cells += [SeedCell(workload, f"{workload} naive", "naive", "", jobs, ModeSpec("naive"), 1, amp),
                      SeedCell(workload, f"{workload} MPS", "mps", "", jobs, ModeSpec("mps"), 1, amp),
                      SeedCell(workload, f"{workload} MIG {'+'.join(slices)}", runs_as, layout, jobs, mode, 1, amp)]
    return cells


def lanes(seed: SeedSpec) -> int:
    """How many GPUs the cells spread over: those `seed.gpus` names (all: this machine's, at least one), else one.

    >>> lanes(SeedSpec(33, gpus=[0, 1]))
    2
    """
    if seed.gpus is None:
        return 1
    return max(1, len(gpu_list()[0])) if seed.gpus == "all" else len(seed.gpus)
