"""colloc-kit: measure how much a GPU gains when several training jobs share it, and which way of sharing serves.

    >>> import colloc_kit
    >>> job = {"model": "smallcnn", "device": "cpu", "steps": 30}
    >>> results = colloc_kit.run([job], mode="naive", copies=2)                # doctest: +SKIP
    >>> results.jobs[["job", "status", "images_per_s"]]                        # doctest: +SKIP

`__all__` is the documented surface, the one notebooks import from (tests/test_notebook_surface.py holds them to it):

    run, run_spec, sweep, panel        run experiments (from a notebook: the panel, one call)
    JobSpec, ModeSpec, ExperimentSpec  describe them
    load, combine, Results             read runs back as pandas frames
    analysis, plots, notebook, widgets summaries with CIs and baselines, figures, notebook helpers, the panel
    machine, modes                     what this machine offers, the sharing modes and whether each runs here
    mig_catalogue, mig_planner         MIG profile tables; exact layouts, impossible ones explained, proposals
    mig_simulator, partition_share     a simulated MIG GPU; the MPS share that mimics a MIG profile
    monitor                            measure your own code: time, energy, GPU samples
    reference, findings                the shipped reference data; the seed study's claims beside the data
    predict, predict_check, advise     a mix's gain predicted from lone runs; held against runs; ranked configurations
    CollocKitError, BadInput, GpuStateError   the kit's errors

    >>> from colloc_kit import mig_planner
    >>> mig_planner.plan("4g,2g,1g", "A100-40GB").layout()
    '4g.20gb,2g.10gb,1g.5gb'

Names are imported on first use, so `python -m colloc_kit.worker` starts without loading pandas; `__init__.pyi`
names them for type checkers (tests/test_notebook_surface.py holds it to `__all__`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {  # name -> the module that defines it
    "run": "pipeline.api", "run_spec": "pipeline.api", "sweep": "pipeline.api", "panel": "notebook.panel",
    "JobSpec": "spec", "ModeSpec": "spec", "ExperimentSpec": "spec",
    "load": "analysis.results", "Results": "analysis.results", "combine": "analysis.results",
    "partition_share": "modes.mps",
    "CollocKitError": "errors", "BadInput": "errors", "GpuStateError": "errors",
}
_MODULES = {  # name -> the module itself
    "analysis": "analysis", "plots": "views.plots", "notebook": "notebook", "widgets": "notebook.panel",
    "machine": "machine", "modes": "modes", "reference": "reference", "findings": "findings",
    "mig_catalogue": "gpu.mig_catalogue", "mig_planner": "gpu.mig_planner", "mig_simulator": "gpu.mig_simulator",
    "monitor": "monitor", "predict": "predict", "predict_check": "predict.check", "advise": "predict.advise",
}
__all__ = sorted([*_LAZY, *_MODULES])


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f".{_MODULES[name]}", __name__)
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'colloc_kit' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public surface, so that tab completion offers it (the names load on first use)."""
    return __all__
