"""What `colloc_kit.predict` offers, for type checkers and for lazy_loader.attach_stub (see __init__.py)."""

from . import advise, check, host, kept, model, serve_advise
from .model import (
    CALIBRATION,
    H100,
    MODES,
    Calibration,
    Config,
    JobPrediction,
    LoneProfile,
    Prediction,
    Target,
    predict,
    smooth_min,
)
