"""A job: one training process (a model on a dataset with a budget), the one schema behind the CLI's flags, the
worker's options and YAML; its choices, the defaults a recipe sets, and a job mapping with changes on top.

    >>> job = JobSpec(model="resnet18", batch_size=64, steps=200, amp="bf16")
    >>> job.to_argv()
    ['--model', 'resnet18', '--steps', '200', '--amp', 'bf16']
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from colloc_kit.errors import BadInput
from colloc_kit.events import ErrorKind
from colloc_kit.paths import absolute
from colloc_kit.spec.checks import excerpt, is_int, is_positive_number, listed, require
from colloc_kit.serving import check_serving

__all__ = ["AMP_CHOICES", "BUDGETS", "DEVICE_CHOICES", "FAULTS", "FAULT_CHOICES", "FEED_FIELDS", "JobSpec",
           "RECIPE_CHOICES", "RECIPE_DEFAULTS", "with_changes"]

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
BUDGETS = ("epochs", "steps", "seconds")  # a job gives at most one
FEED_FIELDS = ("workers", "dataset", "data_root", "image_size")  # where its batches come from: what a feed swap changes


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

    def feed_changes(self, to: "JobSpec") -> dict[str, Any]:
        """The feed fields (`FEED_FIELDS`) in which `to` differs from this job: what a feed swap tells its worker.

        >>> JobSpec(model="resnet18", dataset="cifar10").feed_changes(JobSpec(model="resnet18", image_size=32))
        {'dataset': 'synthetic', 'image_size': 32}
        """
        return {name: getattr(to, name) for name in FEED_FIELDS if getattr(to, name) != getattr(self, name)}

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


def _field_type(f: dataclasses.Field) -> type:
    annotation = str(f.type)
    for name, kind in (("bool", bool), ("int", int), ("float", float)):
        if annotation.startswith(name):
            return kind
    return str
