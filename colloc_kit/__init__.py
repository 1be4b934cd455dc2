"""colloc-kit: measure how much a GPU gains when several training jobs share it, and which way of sharing serves.

    >>> import colloc_kit
    >>> job = {"model": "smallcnn", "device": "cpu", "steps": 30}
    >>> results = colloc_kit.run([job], mode="naive", copies=2)                # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s"]]                        # doctest: +SKIP

Names are imported on first use, so `python -m colloc_kit.worker` starts without loading pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "run": "experiment", "run_spec": "experiment", "sweep": "experiment",
    "load": "results", "Results": "results", "combine": "results",
    "JobSpec": "spec", "ModeSpec": "spec", "ExperimentSpec": "spec",
    "CollocKitError": "errors", "BadInput": "errors", "GpuStateError": "errors",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'colloc_kit' has no attribute {name!r}")
