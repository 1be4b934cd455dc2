"""What a notebook's panel offers on a device: the notebook's modes that run here, then every other registered mode
that runs here without options; and the notebook's modes that cannot, each with why.

    >>> [m.label for m in mode_choices(["mps", "naive"], device="cpu")][:2]
    ['naive', 'exclusive']
"""

from __future__ import annotations

from typing import Any, Sequence

from colloc_kit.modes import registered
from colloc_kit.spec import ModeSpec

__all__ = ["mode_choices", "not_offered"]


def mode_choices(modes: Sequence[Any], device: str) -> list[ModeSpec]:
    """The panel's modes: the notebook's that run on `device` here (the first preselected), then every other
    registered mode that needs no option and runs here (a mode of your own in COLLOC_KIT_MODES included).

    >>> [m.label for m in mode_choices(["mps", "naive"], device="cpu")][:2]
    ['naive', 'exclusive']
    """
    chosen = [m for m in map(ModeSpec.parse, modes) if registered()[m.name].unavailable_here(device=device) is None]
    names = {m.name for m in map(ModeSpec.parse, modes)}
    return chosen + [ModeSpec(name) for name, cls in registered().items()
                     if name not in names and not any(o.required for o in cls.takes)
                     and cls.unavailable_here(device=device) is None]


def not_offered(modes: Sequence[Any], device: str) -> dict[str, str]:
    """The notebook's modes that cannot run on `device` here, each with why (the panel's status line says so).

    >>> list(not_offered(["mps", "naive"], device="cpu"))
    ['mps']
    """
    found = {}
    for mode in map(ModeSpec.parse, modes):
        why = registered()[mode.name].unavailable_here(device=device)
        if why is not None:
            found[mode.label] = why
    return found
