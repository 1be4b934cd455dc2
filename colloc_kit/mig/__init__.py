"""MIG: the profile catalogue, an exact layout planner, a simulated NVML, and applying/restoring layouts.

    >>> from colloc_kit.mig import plan, simulated
    >>> [i.label() for i in plan("4g,2g,1g", "A100-40GB").instances]
    ['4g.20gb@0', '2g.10gb@4', '1g.5gb@6']

Modules: profiles (tables, `resolve`, live catalogue), planner (`plan`, `propose_layouts`), simulator
(`simulated`, `simulated_gpu`), apply (`MigLayout`, the apply/restore journal), cli (`colloc-kit mig ...`).
"""

from .apply import MigLayout
from .planner import ImpossibleLayout, Plan, plan, propose_layouts
from .profiles import GPU_MODELS, GpuModel, Profile, live_catalogue, resolve
from .simulator import simulated, simulated_gpu

__all__ = ["GPU_MODELS", "GpuModel", "ImpossibleLayout", "MigLayout", "Plan", "Profile", "live_catalogue", "plan",
           "propose_layouts", "resolve", "simulated", "simulated_gpu"]
