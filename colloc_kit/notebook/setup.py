"""What every experiment notebook does after its parameters cell: resolve the device, fit the jobs to it, set plotly up,
and make interrupts and the kit's errors one readable line.

    >>> setup = prepare(device="auto", models=["resnet18"], job={"amp": "bf16", "seconds": 10})     # doctest: +SKIP
    >>> setup.device, setup.models, setup.job["device"]          # on a machine without a GPU   # doctest: +SKIP
    ('cpu', ['smallcnn'], 'cpu')

With DEVICE = "auto" on a machine without a CUDA GPU the notebook trains TINY_CPU_JOB instead (a small CNN on
synthetic 32x32 images for a few steps) and says so; an explicit DEVICE = "cpu" runs what the parameters say.

After `prepare`, an interrupted cell ends with one line ("interrupted: the jobs were stopped; what was measured is
kept, marked interrupted") instead of a KeyboardInterrupt traceback, a refused input with the kit's message in the
notebook's terms (`DEVICE = "cpu"`, not `--device cpu`), and Kernel > Interrupt also stops a panel's run
(background.py). A parameter the kit refuses is named as written in its cell (`parameter`): `MIX = 'resnt152': ...`.
"""

from __future__ import annotations

import difflib
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pandas as pd

from colloc_kit.analysis.greying import greyed
from colloc_kit.errors import BadInput, CollocKitError
from colloc_kit.gpu import nvml
from colloc_kit.notebook import background
from colloc_kit.stats import plural
from colloc_kit.views import plots
from colloc_kit.views.tables import number, table
from colloc_kit.worker.models import MODEL_NAMES, TIMM_PREFIX

__all__ = ["TINY_CPU_MODELS", "TINY_CPU_JOB", "Setup", "prepare", "INTERRUPTED_NOTICE", "python_terms", "one_line",
           "install_notices", "noise_warning", "WARNING", "warn", "number", "table", "parameter",
           "NOTEBOOK_NAMES", "if_measured", "direction", "planning_card",
           "guessed", "plural"]

TINY_CPU_MODELS = ["smallcnn"]
TINY_CPU_JOB = {"dataset": "synthetic", "amp": "off", "batch_size": 16, "image_size": 32, "synthetic_samples": 128,
                "steps": 40, "warmup_steps": 5, "workers": 0}


@dataclass(frozen=True)
class Setup:
    """What `prepare` resolved for a notebook: the device, the models, the fields of every job, and whether it fell
    back to the tiny CPU job.

    >>> Setup("cpu", ["smallcnn"], {"device": "cpu"}, tiny=True, gpu=False).models
    ['smallcnn']
    """

    device: str  # "cuda" or "cpu"
    models: list[str]
    job: dict  # JobSpec fields every job of the notebook gets (device included)
    tiny: bool  # True where TINY_CPU_JOB replaced the parameters
    gpu: bool  # True where torch sees a CUDA GPU


def prepare(device: str, models: list[str], job: dict, plotly_renderer: str = "",
            copies: list[int] | None = None) -> Setup:
    """Check the parameters (DEVICE, MODELS, COPIES where given: named as written, before anything runs), resolve
    DEVICE ("auto", "cuda", "cpu"), substitute the tiny CPU job where "auto" finds no GPU (saying MODELS is not run),
    set the renderer."""
    plots.use_renderer(plotly_renderer)
    install_notices()
    pd.set_option("display.float_format", number)
    check_parameters(device, models, copies)
    gpu = nvml.cuda_available()
    if device == "auto" and not gpu:
        print("No CUDA GPU on this machine: running tiny CPU experiments instead of the parameters' "
              f"({', '.join(TINY_CPU_MODELS)} on synthetic 32x32 images, {TINY_CPU_JOB['steps']} steps). "
              f"The parameters' models ({', '.join(models)}) are not run here; on a GPU they are. "
              "The numbers show the method, not GPU behaviour.")
        return Setup("cpu", list(TINY_CPU_MODELS), {**TINY_CPU_JOB, "device": "cpu"}, tiny=True, gpu=False)
    resolved = ("cuda" if gpu else "cpu") if device == "auto" else device
    print(f"device: {resolved}" + ("" if gpu else " (no CUDA GPU on this machine)"))
    return Setup(resolved, list(models), {**job, "device": resolved}, tiny=False, gpu=gpu)


def check_parameters(device: str, models: list[str], copies: list[int] | None = None) -> None:
    """Refuse (BadInput, the parameter named as written in its cell) a DEVICE, a model of MODELS or COPIES the kit
    cannot run, whatever the machine: a typo shows on a CPU too.

    >>> check_parameters("auto", ["resnet51"])
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: the parameters name an unknown model 'resnet51' (did you mean 'resnet50'?)...
    """
    if device not in ("auto", "cuda", "cpu"):
        raise BadInput(f'DEVICE = {device!r} is not a device: write DEVICE = "auto", "cuda" or "cpu"')
    for model in models:
        if not str(model).startswith(TIMM_PREFIX) and model not in MODEL_NAMES:
            close = difflib.get_close_matches(str(model), MODEL_NAMES, n=1)
            raise BadInput(f"the parameters name an unknown model {model!r}"
                           + (f" (did you mean {close[0]!r}?)" if close else "")
                           + f"; valid: {', '.join(MODEL_NAMES)}, or {TIMM_PREFIX}<name>")
    if copies is not None and not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n for n in copies):
        raise BadInput(f"COPIES = {copies!r}: give whole numbers of copies from 1 up, e.g. COPIES = [1, 2, 4]")


@contextmanager
def parameter(name: str, value: Any) -> Iterator[None]:
    """Inside: a value the kit refuses is named as the notebook's parameter `name` holds it, on one line.

    >>> with parameter("MIX", "resnt152"):
    ...     raise BadInput("no lone run of a workload called 'resnt152'")
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: MIX = 'resnt152': no lone run of a workload called 'resnt152'
    """
    try:
        yield
    except CollocKitError as error:
        raise BadInput(f"{name} = {value!r}: {python_terms(error)}") from None


INTERRUPTED_NOTICE = "interrupted: the jobs were stopped; what was measured is kept, marked interrupted"


CONNECTIVES = {"or", "and", "to", "for", "with", "instead", "in", "on", "first"}  # words after a flag, not its value
NOTEBOOK_NAMES = {  # flags the notebooks' parameters cells hold, as written
    "device": "DEVICE", "copies": "COPIES", "layout": "LAYOUT", "mix": "MIX", "models": "MODELS", "model": "MODELS",
    "repeats": "REPEATS", "experiment": "EXPERIMENT"}


def python_terms(message: Any) -> str:
    """The kit's messages name command-line flags; in a notebook say its parameter as written in the parameters cell
    (`NOTEBOOK_NAMES`), else the keyword.

    >>> python_terms("CUDA is not available on this machine; use --device cpu")
    'CUDA is not available on this machine; use DEVICE = "cpu"'
    >>> python_terms("raise --synthetic-samples or lower --batch-size")
    'raise synthetic_samples or lower batch_size'
    """
    def keyword(match: re.Match) -> str:
        name, value = match.group(1).replace("-", "_"), match.group(2)
        if value and value not in CONNECTIVES:
            return f'{NOTEBOOK_NAMES[name]} = "{value}"' if name in NOTEBOOK_NAMES else f'{name}="{value}"'
        return NOTEBOOK_NAMES.get(name, name) + (match.group(0)[len(match.group(1)) + 2:] if value else "")

    return re.sub(r"--([a-z][a-z0-9-]*)(?: ([a-z][\w.]*))?\b", keyword, str(message))


def one_line(error: BaseException) -> str:
    """What a notebook or the panel shows for an error: the interrupt notice, or `Kind: message` on one line."""
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED_NOTICE
    text = python_terms(error) if isinstance(error, CollocKitError) else str(error)
    return f"{type(error).__name__}: {' '.join(text.split())}"


def install_notices() -> bool:
    """In IPython: interrupted cells and the kit's errors end with `one_line` instead of a traceback, and SIGINT
    stops a panel's background run. False outside IPython."""
    try:
        from IPython import get_ipython  # noqa: PLC0415 - optional: only inside IPython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False

    def notice(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list[str]:
        line = [one_line(value)]
        shell._showtraceback(etype, value, line)  # as IPython's set_custom_exc example does
        return line

    shell.set_custom_exc((KeyboardInterrupt, CollocKitError), notice)
    background.route_kernel_interrupts()
    return True


def if_measured(frame: pd.DataFrame, columns: list[str], what: str, draw: Callable[[], Any]) -> Any:
    """`draw()` where `frame` holds a value in any of `columns`; else one line in words instead of an empty figure
    (a CPU run has no GPU to watch) and None.

    >>> if_measured(pd.DataFrame({"sm_util_pct_mean": [None]}), ["sm_util_pct_mean"], "How busy the GPU was", list)
    How busy the GPU was: not drawn, as no run here measured it (a run on a CPU has no GPU to watch).
    """
    if any(c in frame and frame[c].notna().any() for c in columns):
        return draw()
    print(f"{what}: not drawn, as no run here measured it (a run on a CPU has no GPU to watch).")
    return None


def planning_card(fallback: str) -> tuple[Any, str]:
    """The MIG table a page plans with: that of the GPU it runs on where the kit knows it, else `fallback`'s
    (a built-in table), and a line that says which card that is.

    >>> shape, said = planning_card("H100-80GB")                       # on a machine without a GPU  # doctest: +SKIP
    >>> said                                                                                          # doctest: +SKIP
    'MIG planned on H100-80GB (a built-in table: this machine has no GPU)'
    """
    from colloc_kit import machine  # noqa: PLC0415 - NVML: only where a page plans MIG
    from colloc_kit.gpu import mig_catalogue  # noqa: PLC0415 - only where a page plans MIG

    gpus = machine.describe()["gpus"]
    card = mig_catalogue.model_for_device(gpus[0]["name"]) if gpus else None
    if card is not None:
        return card, f"MIG planned on {card.name}, the GPU this page ran on"
    here = f"this machine's {gpus[0]['name']} has no MIG table in the kit" if gpus else "this machine has no GPU"
    return mig_catalogue.gpu_model(fallback), f"MIG planned on {fallback} (a built-in table: {here})"


def guessed(guess: Any, name: str = "GUESS") -> bool:
    """Whether the student wrote a guess; where not, a notice that the cells after it reveal nothing until then (Run
    All stops revealing, without an error).

    >>> guessed(1.5)
    True
    >>> guessed(None)
    GUESS first: write your guess in the parameters cell (e.g. GUESS = 1.5) and run again; until then the cells \
below reveal nothing.
    False
    """
    if guess is not None:
        return True
    print(f"{name} first: write your guess in the parameters cell (e.g. {name} = 1.5) and run again; until then the "
          "cells below reveal nothing.")
    return False


def direction(first: float, last: float, within: float = 0.05) -> str:
    """How a number went from `first` to `last`, in words a reading can put beside them.

    >>> direction(1527, 1059), direction(100, 180), direction(100, 103)
    ('falls', 'grows', 'stays within 5 %')
    """
    if abs(last - first) <= within * abs(first):
        return f"stays within {within:.0%}".replace("%", " %")
    return "grows" if last > first else "falls"


noise_warning = greyed  # the one noise rule (analysis.greying): greys only what lies within the noise


WARNING = "warning: "  # how a page's warnings start: `colloc-kit batch` lists them on its index page


def warn(message: str | None) -> str | None:
    """Print `message` as the page's warning (the batch's index lists it); nothing where it is None. Returns it.

    >>> warn("identical jobs of one run differ 2.1x")
    warning: identical jobs of one run differ 2.1x
    'identical jobs of one run differ 2.1x'
    """
    if message:
        print(WARNING + message)
    return message
