"""The notebook surface of colloc_kit for type checkers: the same names as `__all__` in __init__.py, where each is
imported on first use."""

from . import analysis, findings, machine, modes, monitor, notebook, predict, reference
from .analysis.results import Results, combine, load
from .errors import BadInput, CollocKitError, GpuStateError
from .gpu import mig_catalogue, mig_planner, mig_simulator
from .modes.mps import partition_share
from .notebook import panel as widgets
from .notebook.panel import panel
from .pipeline.api import run, run_spec, sweep
from .predict import advise
from .predict import check as predict_check
from .spec import ExperimentSpec, JobSpec, ModeSpec
from .views import plots

__version__: str

__all__ = ["BadInput", "CollocKitError", "ExperimentSpec", "GpuStateError", "JobSpec", "ModeSpec", "Results",
           "advise", "analysis", "combine", "findings", "load", "machine", "mig_catalogue", "mig_planner",
           "mig_simulator", "modes", "monitor", "notebook", "panel", "partition_share", "plots", "predict",
           "predict_check", "reference", "run", "run_spec", "sweep", "widgets"]
