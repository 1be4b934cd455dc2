"""Where cells run: one registry of executors, by name. Built in: `here` (this process, one GPU), `gpus` (several
GPUs of this host, a process per cell), `slurm` (an array task per cell). A spec picks one by its keys (`slurm:`,
`gpus:`, else here); `run_spec(spec, executor=NAME)` names one, a plug-in's too once `register`ed. The interface
(`Executor`, `CellJob`, options) is in `base`, each built-in executor in a module of its name.

    >>> sorted(names())
    ['gpus', 'here', 'slurm']
    >>> executor_class("nowhere")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: executor 'nowhere' is not known; known: gpus, here, slurm (a plug-in: ...)
"""

from __future__ import annotations

from typing import Any

from colloc_kit.errors import BadInput
from colloc_kit.pipeline.executors.base import CellJob, Executor, FinishedCell, NoOptions, options_from
from colloc_kit.pipeline.executors.gpus import GpusExecutor
from colloc_kit.pipeline.executors.here import HereExecutor
from colloc_kit.pipeline.executors.slurm import SlurmExecutor, SlurmOptions
from colloc_kit.spec import ExperimentSpec

__all__ = ["CellJob", "Executor", "FinishedCell", "GpusExecutor", "HereExecutor", "NoOptions", "SlurmExecutor",
           "SlurmOptions", "chosen", "executor_class", "names", "options_from", "register"]

_REGISTRY: dict[str, type[Executor]] = {}


def register(kind: type[Executor]) -> type[Executor]:
    """Make `kind` (an Executor subclass with a `name`) known by its name; usable as a class decorator."""
    if not (isinstance(kind, type) and issubclass(kind, Executor) and isinstance(getattr(kind, "name", None), str)
            and kind.name.isidentifier()):
        raise BadInput(f"an executor is a subclass of colloc_kit.pipeline.executors.Executor with a `name` that is a "
                       f"word, got {kind!r}")
    _REGISTRY[kind.name] = kind
    return kind


def names() -> list[str]:
    """The names of the executors known now."""
    return list(_REGISTRY)


def executor_class(name: str) -> type[Executor]:
    """The executor registered as `name`; BadInput naming the known ones."""
    if name not in _REGISTRY:
        raise BadInput(f"executor {name!r} is not known; known: {', '.join(sorted(_REGISTRY))} "
                       "(a plug-in: executors.register)")
    return _REGISTRY[name]


def chosen(spec: ExperimentSpec, name: str | None = None) -> tuple[type[Executor], Any]:
    """The executor class for `spec` and its options: `name` where given, else by the spec's keys (`slurm:` ->
    slurm with those options, `gpus:` -> gpus, else here)."""
    if name is not None:
        return executor_class(name), spec.slurm if name == SlurmExecutor.name else None
    if spec.slurm is not None:
        return SlurmExecutor, spec.slurm
    return (GpusExecutor if spec.gpus is not None else HereExecutor), None


for _builtin in (HereExecutor, GpusExecutor, SlurmExecutor):
    register(_builtin)
