"""The two modes that change nothing on the GPU: `exclusive` (the baseline) and `naive` (time-slicing).

    >>> ExclusiveMode(workdir=".", gpu=0).sequential
    True
"""

from __future__ import annotations

from .base import SharingMode


class ExclusiveMode(SharingMode):
    """Jobs one after another, each alone on the GPU: the baseline every sharing mode is compared with."""

    name = "exclusive"
    sequential = True


class NaiveMode(SharingMode):
    """All jobs at once on one GPU; the driver time-slices between their contexts."""

    name = "naive"
