"""Sharing modes: each a `SharingMode` subclass that registers itself under its `name` (see `registry`).

    base         the interface: `SharingMode`, `Option`, `Slot`
    registry     modes by name, built-in and plug-in (COLLOC_KIT_MODES, entry points)
    simple       exclusive, naive and the `PlainCudaMode` building block
    mps          MPS, with thread and memory limits and MIG-shaped partitions
    mig          MIG, and MPS on MIG

Adding a mode is one file: subclass `SharingMode` (or `PlainCudaMode`, `NaiveMode`, ...) with a `name`, a one-line
docstring and its options in `takes`, and name the file or its module in COLLOC_KIT_MODES (README, "Your own mode").

    >>> from colloc_kit.modes import mode_class
    >>> mode_class("mps").option_names[:2]
    ('thread_percentage', 'memory_limit_mb')

Names are imported on first use, so the worker, which imports `spec`, never loads the modes.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Option": "base", "SharingMode": "base", "Slot": "base",
    "availability": "registry", "make_mode": "registry", "mode_class": "registry", "registered": "registry",
    "validate_mode_spec": "registry",
    "PlainCudaMode": "simple", "ExclusiveMode": "simple", "NaiveMode": "simple", "MpsMode": "mps", "MigMode": "mig",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'colloc_kit.modes' has no attribute {name!r}")
