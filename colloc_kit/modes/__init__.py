"""Sharing modes by name. Each mode module registers its class in MODES.

    >>> mode = make_mode(ModeSpec("naive"), workdir="runs/x", gpu=0, device="cuda")   # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BadInput
from ..spec import ModeSpec
from .base import SharingMode, Slot
from .mig import MigMode
from .mps import MpsMode
from .simple import ExclusiveMode, NaiveMode

MODES: dict[str, type[SharingMode]] = {cls.name: cls for cls in (ExclusiveMode, NaiveMode, MpsMode, MigMode)}


def mode_class(name: str) -> type[SharingMode]:
    try:
        return MODES[name]
    except KeyError:
        raise BadInput(f"unknown sharing mode {name!r}; choose one of {', '.join(sorted(MODES))}") from None


def validate_mode_spec(spec: ModeSpec, device: str) -> None:
    """Refuse an unknown mode or bad options before anything is built."""
    mode_class(spec.name).validate_options(dict(spec.options), device)


def make_mode(spec: ModeSpec, workdir: Path, gpu: int, device: str) -> SharingMode:
    cls = mode_class(spec.name)
    cls.validate_options(dict(spec.options), device)
    return cls(workdir=Path(workdir), gpu=gpu, device=device, **spec.options)


__all__ = ["MODES", "SharingMode", "Slot", "make_mode", "mode_class", "validate_mode_spec"]
