"""What `colloc_kit.notebook` offers, for type checkers and for lazy_loader.attach_stub (see __init__.py)."""

from . import background, fits, gains, offered, panel, readings, setup, toggles
from .setup import (
    INTERRUPTED_NOTICE,
    TINY_CPU_JOB,
    TINY_CPU_MODELS,
    WARNING,
    Setup,
    direction,
    guessed,
    if_measured,
    install_notices,
    noise_warning,
    number,
    one_line,
    parameter,
    planning_card,
    plural,
    prepare,
    python_terms,
    table,
    warn,
)
