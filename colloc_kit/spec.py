"""What to run: a job (one training process), a sharing mode, and an experiment (jobs x modes x copies x repeats).

Specs are plain dataclasses, validated when built, so bad input is refused before anything starts::

    >>> job = JobSpec(model="resnet18", batch_size=64, steps=200, amp="bf16")
    >>> spec = ExperimentSpec(jobs=[job], modes=[ModeSpec("naive")], copies=[1, 2, 4], repeats=3)
    >>> spec = ExperimentSpec.from_yaml("experiment.yaml")      # doctest: +SKIP

A YAML spec::

    name: resnet-collocation
    device: cuda
    modes: [exclusive, naive, {name: mps, thread_percentage: 50}]
    copies: [1, 2, 4]
    repeats: 3
    placement: pinned          # pinned (default): a block of cores per job; unpinned: as the OS schedules them
    gpus: [0, 1]               # optional: cells spread over these GPUs (or: all); or instead
    # slurm: {partition: gpu, time_min: 30}   # one Slurm array task per cell (pip install colloc-kit[slurm])
    # mlflow: http://127.0.0.1:5000   # also log each cell to this MLflow server (pip install colloc-kit[mlflow])
    jobs:                      # job groups; each group is started `copies` times
      - {model: resnet18, batch_size: 64, amp: bf16, steps: 300}
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from colloc_kit.errors import BadInput
from colloc_kit.events import ErrorKind
from colloc_kit.modes.registry import validate_mode_spec
from colloc_kit.paths import absolute
from colloc_kit.spec_baselines import BaselineKeys
from colloc_kit.spec_checks import excerpt, is_int, is_positive_number, listed, require
from colloc_kit.serving import check_serving

__all__ = ["ExperimentSpec", "JobSpec", "ModeSpec", "RECIPE_DEFAULTS", "with_changes"]

AMP_CHOICES = ("off", "bf16", "fp16")
DEVICE_CHOICES = ("cuda", "cpu")
FAULTS = {"out_of_memory": ErrorKind.OUT_OF_MEMORY, "cuda_error": ErrorKind.CUDA_ERROR,  # a fault to inject, and
          "crash": ErrorKind.KILLED,  # the error kind its job is recorded with (a crash: SIGKILL, no error reported)
          "host_memory": ErrorKind.OUT_OF_MEMORY}  # host memory runs out mid-run (a test-only RLIMIT_AS)
FAULT_CHOICES = tuple(FAULTS)
RECIPE_CHOICES = ("kit", "seed")
# what `recipe: seed` sets where the job does not say: the seed study's timm train.py as run (224 px, 4 loader workers,
# no pinned memory); `seed` also changes the transform, loss and optimizer (colloc_kit/worker/recipes.py)
RECIPE_DEFAULTS = {"seed": {"image_size": 224, "workers": 4, "pin_memory": False}}
PLACEMENTS = ("pinned", "unpinned")  # how jobs sit on the host's cores (ExperimentSpec.placement)
MAX_JOBS_PER_RUN = 48  # the most clients one MPS server takes on Volta and later; more would not start anyway
BUDGETS = ("epochs", "steps", "seconds")  # a job gives at most one


def with_changes(job: Mapping[str, Any], changes: Mapping[str, Any]) -> dict:
    """A job mapping with `changes` on top; a budget in `changes` replaces the job's budget instead of adding one.

    >>> with_changes({"model": "resnet18", "seconds": 8}, {"steps": 60})
    {'model': 'resnet18', 'steps': 60}
    """
    if any(k in BUDGETS for k in changes):
        job = {k: v for k, v in job.items() if k not in BUDGETS}
    return {**job, **changes}


def _opt(help_: str, **kw: Any) -> Any:
    return field(metadata={"help": help_}, **kw)


@dataclass(frozen=True)
class JobSpec:
    """One training job: a torchvision model on a dataset with a budget. Fields are the worker's options."""

    model: str = _opt("torchvision model name (see `colloc-kit info --models`), or 'smallcnn' for quick CPU runs")
    dataset: str = _opt("synthetic | cifar10 | imagefolder | imagenet64", default="synthetic")
    data_root: str | None = _opt("folder holding the dataset (not needed for synthetic)", default=None)
    batch_size: int = _opt("images per step", default=64)
    epochs: int | None = _opt("passes over the dataset, warm-up included (default 1 when no budget is given)",
                              default=None)
    steps: int | None = _opt("steps to measure, after the warm-up steps", default=None)
    seconds: float | None = _opt("seconds to measure, after the warm-up steps (with until_ci: the most)", default=None)
    until_ci: float | None = _opt("end the measured window early, once the half-width of its images/s 95-percent "
                                  "CI is at most this share of it (e.g. 0.02), after min_seconds; needs seconds "
                                  "(the most)", default=None)
    min_seconds: float = _opt("with until_ci: seconds measured at least (a CI of few intervals is unstable: an "
                              "early stop on one is chance)", default=10.0)
    warmup_steps: int = _opt("steps before the measured window starts", default=10)
    image_size: int | None = _opt("input side in pixels (default: the dataset's own, 224 for synthetic; 32 for "
                                  "synthetic data on the CPU or for smallcnn)", default=None)
    synthetic_samples: int = _opt("images per epoch of the synthetic dataset", default=2048)
    amp: str = _opt("automatic mixed precision: off | bf16 | fp16", default="off")
    channels_last: bool = _opt("use the channels_last memory format", default=False)
    cudnn_autotune: str = _opt("study (cuDNN autotunes as in the study) | off (a workload apart)", default="study")
    workers: int = _opt("data-loader worker processes", default=2)
    pin_memory: bool = _opt("pin host memory of batches (CUDA only)", default=True)
    seed: int = _opt("random seed", default=0)
    lr: float = _opt("SGD learning rate", default=0.01)
    recipe: str = _opt("training recipe: kit (light augmentation, plain SGD) | seed (the seed study's timm train.py as "
                       "run: timm's training transform to 224 px on the CPU, 4 loader workers, weight decay, label "
                       "smoothing; sets image_size 224, workers 4, no pinned memory unless given)", default="kit")
    device: str = _opt("cuda | cpu", default="cuda")
    interval_s: float = _opt("seconds between progress events", default=1.0)
    fail_at_step: int | None = _opt("FAULT INJECTION for tests: fail at this step", default=None)
    fail_kind: str = _opt("FAULT INJECTION: out_of_memory | cuda_error | crash | host_memory", default="out_of_memory")
    role: str = _opt("train | serve: an inference job serving requests (colloc_kit.serving)", default="train")
    rate_per_s: float | None = _opt("serve: open-loop requests per second (Poisson arrivals)", default=None)
    concurrency: int | None = _opt("serve: closed-loop clients, each sending on the last reply", default=None)
    max_batch: int = _opt("serve: requests served together at most", default=1)
    max_delay_ms: float = _opt("serve: ms the oldest request waits for a fuller batch", default=0.0)
    slo: str | None = _opt("serve: the latency target with units, e.g. 50ms", default=None)

    def __post_init__(self) -> None:
        require(isinstance(self.model, str) and self.model, "model must be a non-empty name, e.g. resnet18")
        for name in ("amp", "cudnn_autotune"):  # YAML reads an unquoted `off` as false: the choice named off
            if getattr(self, name) is False:
                object.__setattr__(self, name, "off")
        for name in ("dataset", "amp", "device", "fail_kind", "recipe", "cudnn_autotune"):
            value = getattr(self, name)
            require(isinstance(value, str), f"{name} must be a name, got {excerpt(value)}")
        require(self.data_root is None or isinstance(self.data_root, str),
                f"data_root must be a folder path (a string), got {excerpt(self.data_root)}")
        if self.data_root:  # absolute where it enters: a worker runs in its run's folder, a notebook in its batch's
            object.__setattr__(self, "data_root", str(absolute(self.data_root)))
        for name in ("channels_last", "pin_memory"):
            require(isinstance(getattr(self, name), bool),
                    f"{name} must be true or false, got {excerpt(getattr(self, name))}")
        for name in ("batch_size", "epochs", "steps", "synthetic_samples", "image_size", "fail_at_step"):
            value = getattr(self, name)
            if value is not None:
                require(is_int(value) and value > 0, f"{name} must be a positive integer, got {excerpt(value)}")
        for name in ("warmup_steps", "workers", "seed"):
            require(is_int(getattr(self, name)) and getattr(self, name) >= 0,
                    f"{name} must be a whole number >= 0, got {excerpt(getattr(self, name))}")
        for name in ("seconds", "interval_s", "lr", "min_seconds", "until_ci"):
            value = getattr(self, name)
            if value is not None:
                require(is_positive_number(value), f"{name} must be a positive number, got {excerpt(value)}")
        require(sum(x is not None for x in (self.epochs, self.steps, self.seconds)) <= 1,
                "give at most one budget: epochs, steps or seconds")
        if self.until_ci is not None:
            require(self.until_ci < 1, f"until_ci is a share of the throughput such as 0.02, got "
                                        f"{excerpt(self.until_ci)}")
            require(self.seconds is not None and self.seconds >= self.min_seconds,
                    "until_ci ends a window of at most `seconds`: give seconds (at least min_seconds, "
                    f"{self.min_seconds:g}), e.g. --seconds 15 --until-ci 0.02")
        require(self.amp in AMP_CHOICES, f"amp must be one of {', '.join(AMP_CHOICES)}, got {excerpt(self.amp)}")
        require(self.device in DEVICE_CHOICES, f"device must be cuda or cpu, got {excerpt(self.device)}")
        for name, choices in (("fail_kind", FAULT_CHOICES), ("recipe", RECIPE_CHOICES),
                              ("cudnn_autotune", ("study", "off"))):  # study: cudnn.benchmark, as the study's train.py
            require(getattr(self, name) in choices,
                    f"{name} must be one of {', '.join(choices)}, got {excerpt(getattr(self, name))}")
        check_serving(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "job") -> "JobSpec":
        """Build from a dict (YAML, widgets); unknown keys are refused with the list of valid ones. A recipe's
        defaults (RECIPE_DEFAULTS) fill the keys the mapping leaves out.

        >>> JobSpec.from_mapping({"model": "resnet26", "recipe": "seed"}).workers
        4
        """
        known = {f.name for f in fields(cls)}
        unknown = listed(set(data) - known)
        require(not unknown, f"{where}: unknown key(s) {unknown}; valid keys: {', '.join(sorted(known))}")
        require("model" in data, f"{where}: 'model' is required")
        recipe = data.get("recipe")
        defaults = RECIPE_DEFAULTS.get(recipe, {}) if isinstance(recipe, str) else {}
        try:
            return cls(**{**defaults, **data})
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None

    def to_dict(self) -> dict:
        """Every field as a plain dict (the worker's and the manifest's form).

        >>> JobSpec(model="resnet18").to_dict()["model"]
        'resnet18'
        """
        return dataclasses.asdict(self)

    def with_(self, **changes: Any) -> "JobSpec":
        """A copy with `changes` (a frozen spec is never edited in place).

        >>> JobSpec(model="resnet18").with_(batch_size=32).batch_size
        32
        """
        return dataclasses.replace(self, **changes)

    def to_argv(self) -> list[str]:
        """Command-line options for `python -m colloc_kit.worker` that rebuild this spec."""
        argv: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == f.default:
                continue
            flag = "--" + f.name.replace("_", "-")
            if isinstance(value, bool):
                argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
            else:
                argv += [flag, str(value)]
        return argv

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser | argparse._ArgumentGroup, require_model: bool = False
                      ) -> None:
        """Add one option per field to an argparse parser (the worker's and the CLI's options come from here)."""
        for f in fields(cls):
            flag = "--" + f.name.replace("_", "-")
            kind = _field_type(f)
            if kind is bool:
                parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                                    default=argparse.SUPPRESS, help=f.metadata["help"])
            else:
                parser.add_argument(flag, dest=f.name, type=kind, default=argparse.SUPPRESS,
                                    required=require_model and f.name == "model",
                                    help=f.metadata["help"])

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace, **overrides: Any) -> "JobSpec":
        """A JobSpec from the CLI's parsed flags (those that are JobSpec fields), with `overrides` on top."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in vars(ns).items() if k in known}
        values.update(overrides)
        return cls.from_mapping(values, where="options")


@dataclass(frozen=True)
class ModeSpec:
    """A sharing mode by name, with its options (e.g. MPS thread percentage, a MIG layout)."""

    name: str
    options: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any) -> "ModeSpec":
        """'naive', or {'name': 'mps', 'thread_percentage': 50} as in YAML."""
        if isinstance(value, ModeSpec):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping) and isinstance(value.get("name"), str):
            options = {k: v for k, v in value.items() if k != "name"}
            return cls(value["name"], options)
        raise BadInput(f"a mode is a name such as 'naive' or a mapping with 'name' and options, got {excerpt(value)}; "
                       "write e.g. {name: mps, thread_percentage: 50}")

    @property
    def label(self) -> str:
        """A short human label, e.g. 'mps(thread_percentage=50)'."""
        if not self.options:
            return self.name
        inner = ",".join(f"{k}={_short(v)}" for k, v in sorted(self.options.items()))
        return f"{self.name}({inner})"


@dataclass(frozen=True)
class ExperimentSpec(BaselineKeys):
    """Job groups run under each mode, at each copy count, `repeats` times. One run per (mode, copies, repeat)."""

    jobs: list[JobSpec]
    modes: list[ModeSpec] = field(default_factory=lambda: [ModeSpec("naive")])
    copies: list[int] = field(default_factory=lambda: [1])
    repeats: int = 1
    name: str = "experiment"
    gpu: int = 0
    time_limit_s: float | None = None
    monitor: bool = True
    monitor_interval_s: float = 0.15
    gpus: list[int] | str | None = None  # cells dispatched over these GPUs, one cell per GPU at a time; "all"
    slurm: dict | None = None  # submit one Slurm array task per cell with these options (see slurm.OPTIONS)
    executor: dict | None = None  # {name: an executor, its options...}: any executor, a plug-in's too (executors/)
    placement: str = "pinned"  # pinned: each job its own block of cores; unpinned: as the OS schedules (the study)
    mlflow: str | None = None  # also log each cell, as it completes, to this MLflow tracking URI (mlflow_log.py)
    warm_repeats: bool = False  # a cell's repeats as consecutive windows of one launch of its jobs (pipeline/warm.py)

    def __post_init__(self) -> None:
        super().__post_init__()  # baselines, baseline_precision, baseline_max_repeats (spec_baselines)
        require(len(self.jobs) > 0, "an experiment needs at least one job")
        require(len(self.modes) > 0,
                "an experiment needs at least one mode; give e.g. --mode naive (YAML: modes: [naive])")
        twice = sorted({m.label for m in self.modes if self.modes.count(m) > 1})
        require(not twice, f"modes lists {', '.join(twice)} more than once; name each mode once")
        require(len(self.copies) > 0 and all(is_int(c) and c > 0 for c in self.copies),
                f"copies must be whole numbers of at least 1, such as [1, 2, 4]; got {excerpt(self.copies)}")
        most = max(self.copies) * len(self.jobs)
        require(most <= MAX_JOBS_PER_RUN, f"{max(self.copies)} copies of {len(self.jobs)} job group(s) make {most} "
                                           f"jobs in one run; a run starts at most {MAX_JOBS_PER_RUN}: lower --copies")
        require(is_int(self.repeats) and self.repeats > 0,
                f"repeats must be a positive integer, got {excerpt(self.repeats)}")
        require(is_int(self.gpu) and self.gpu >= 0, f"gpu must be a GPU index >= 0, got {excerpt(self.gpu)}")
        require(isinstance(self.name, str) and self.name.strip(". ") and not set(self.name) & set("/\\\0"),
                f"name must be a folder name without / or \\ (e.g. resnet-study), got {excerpt(self.name)}")
        if self.time_limit_s is not None:
            require(is_positive_number(self.time_limit_s),
                    f"time_limit_s must be a positive number of seconds, got {excerpt(self.time_limit_s)}")
        require(self.placement in PLACEMENTS,
                f"placement must be one of {', '.join(PLACEMENTS)}, got {excerpt(self.placement)}")
        require(isinstance(self.monitor, bool), f"monitor must be true or false, got {excerpt(self.monitor)}")
        require(isinstance(self.warm_repeats, bool),
                f"warm_repeats must be true or false, got {excerpt(self.warm_repeats)}")
        require(is_positive_number(self.monitor_interval_s),
                f"monitor_interval_s must be a positive number of seconds, got {excerpt(self.monitor_interval_s)}")
        if self.gpus is not None:
            require(self.gpus == "all" or (isinstance(self.gpus, list) and self.gpus
                                            and all(is_int(g) and g >= 0 for g in self.gpus)),
                    f"gpus is 'all' or a list of GPU indices such as [0, 1], got {excerpt(self.gpus)}")
            require(self.gpus == "all" or len(set(self.gpus)) == len(self.gpus),
                    f"gpus lists a GPU twice ({self.gpus}); a GPU runs one cell at a time: name each once")
        if self.slurm is not None:  # its options are the Slurm executor's to check (pipeline/executors/slurm.py)
            require(self.gpus is None, "give gpus or slurm, not both: Slurm hands each cell its own GPU")
        if self.mlflow is not None:
            require(isinstance(self.mlflow, str) and self.mlflow.strip(),
                    f"mlflow is a tracking URI such as http://127.0.0.1:5000, got {excerpt(self.mlflow)}")
            require("@" not in urlsplit(self.mlflow).netloc, "mlflow: the tracking URI is recorded with the runs; "
                    "leave credentials out of it and set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
        devices = {j.device for j in self.jobs}
        require(len(devices) == 1, f"all jobs of an experiment run on one device kind, got {sorted(devices)}")
        for mode in self.modes:
            validate_mode_spec(mode, device=self.device)

    @property
    def device(self) -> str:
        """The device of the experiment's jobs (the first job's: all jobs of a spec share it)."""
        return self.jobs[0].device

    def runs(self) -> list[tuple[ModeSpec, int, int]]:
        """Every run as (mode, copies, repeat), repeats innermost-last so that repeats are spread over time."""
        return [(m, c, r) for r in range(self.repeats) for m in self.modes for c in self.copies]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "ExperimentSpec":
        """Build from a YAML-like dict (see the module's example)."""
        require(isinstance(data, Mapping), f"a spec is a mapping of keys, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = listed(set(data) - known)
        require(not unknown, f"spec: unknown key(s) {unknown}; valid keys: {', '.join(sorted(known))}")
        groups: Any = data.get("jobs")
        require(isinstance(groups, list) and groups, "spec: 'jobs' must be a non-empty list of job groups")
        jobs = []
        for i, group in enumerate(groups):
            require(isinstance(group, Mapping), f"spec: jobs[{i}] must be a mapping such as {{model: resnet18}}")
            jobs.append(JobSpec.from_mapping(group, where=f"jobs[{i}]"))
        modes = data.get("modes", ["naive"])
        modes = [modes] if isinstance(modes, (str, Mapping)) else modes
        require(isinstance(modes, list), "spec: 'modes' must be a list")
        copies = data.get("copies", [1])
        copies = [copies] if is_int(copies) else copies
        require(isinstance(copies, list), f"spec: 'copies' must be a whole number of copies or a list of them, such as "
                                          f"[1, 2, 4]; got {excerpt(copies)}")
        rest = {k: v for k, v in data.items() if k not in ("jobs", "modes", "copies")}
        try:
            return cls(jobs=jobs, modes=[ModeSpec.parse(m) for m in modes], copies=copies, **rest)
        except TypeError as exc:
            raise BadInput(f"spec: {exc}") from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> "ExperimentSpec":
        """An ExperimentSpec read from a YAML file (safe YAML: `spec_yaml`), checked as `from_mapping` does."""
        from colloc_kit.spec_yaml import read_yaml  # noqa: PLC0415 - PyYAML loads only when a spec file is read
        return cls.from_mapping(read_yaml(path))

    def to_dict(self) -> dict:
        """Plain data for the manifest (and a YAML file that `from_mapping` reads back)."""
        data = dataclasses.asdict(self)
        data["jobs"] = [j.to_dict() for j in self.jobs]
        data["modes"] = [{"name": m.name, **m.options} for m in self.modes]
        return data


def _short(value: Any) -> str:
    return "+".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _field_type(f: dataclasses.Field) -> type:
    annotation = str(f.type)
    for name, kind in (("bool", bool), ("int", int), ("float", float)):
        if annotation.startswith(name):
            return kind
    return str
