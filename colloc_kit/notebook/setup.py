"""What every experiment notebook does after its parameters cell: resolve the device, fit the jobs to it, set plotly up,
and make interrupts and the kit's errors one readable line.

    >>> setup = prepare(device="auto", models=["resnet18"], job={"amp": "bf16", "seconds": 10})     # doctest: +SKIP
    >>> setup.device, setup.models, setup.job["device"]          # on a machine without a GPU   # doctest: +SKIP
    ('cpu', ['smallcnn'], 'cpu')

With DEVICE = "auto" on a machine without a CUDA GPU the notebook trains TINY_CPU_JOB instead (a small CNN on
synthetic 32x32 images for a few steps) and says so; an explicit DEVICE = "cpu" runs what the parameters say.

After `prepare`, an interrupted cell ends with one line ("interrupted: the jobs were stopped; what was measured is
kept, marked interrupted") instead of a KeyboardInterrupt traceback, a refused input with the kit's message in Python
terms (`device="cpu"`, not `--device cpu`), and Kernel > Interrupt also stops a panel's run (background.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from colloc_kit.analysis import summaries as analysis
from colloc_kit.errors import CollocKitError
from colloc_kit.notebook import background
from colloc_kit.views import plots
from colloc_kit.views.tables import number, table

__all__ = ["TINY_CPU_MODELS", "TINY_CPU_JOB", "Setup", "prepare", "INTERRUPTED_NOTICE", "python_terms", "one_line",
           "install_notices", "noise_warning", "WARNING", "warn", "number", "table"]

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


def prepare(device: str, models: list[str], job: dict, plotly_renderer: str = "") -> Setup:
    """Resolve DEVICE ("auto", "cuda", "cpu"), substitute the tiny CPU job where "auto" finds no GPU, set the
    renderer."""
    import torch  # noqa: PLC0415 - heavy: only to see whether a GPU is here

    plots.use_renderer(plotly_renderer)
    install_notices()
    pd.set_option("display.float_format", number)
    gpu = torch.cuda.is_available()
    if device == "auto" and not gpu:
        print("No CUDA GPU on this machine: running tiny CPU experiments instead of the parameters' "
              f"({', '.join(TINY_CPU_MODELS)} on synthetic 32x32 images, {TINY_CPU_JOB['steps']} steps). "
              "The numbers show the method, not GPU behaviour.")
        return Setup("cpu", list(TINY_CPU_MODELS), {**TINY_CPU_JOB, "device": "cpu"}, tiny=True, gpu=False)
    resolved = ("cuda" if gpu else "cpu") if device == "auto" else device
    print(f"device: {resolved}" + ("" if gpu else " (no CUDA GPU on this machine)"))
    return Setup(resolved, list(models), {**job, "device": resolved}, tiny=False, gpu=gpu)


INTERRUPTED_NOTICE = "interrupted: the jobs were stopped; what was measured is kept, marked interrupted"


CONNECTIVES = {"or", "and", "to", "for", "with", "instead", "in", "on", "first"}  # words after a flag, not its value


def python_terms(message: Any) -> str:
    """The kit's messages name command-line flags; in a notebook say the keyword instead.

    >>> python_terms("CUDA is not available on this machine; use --device cpu")
    'CUDA is not available on this machine; use device="cpu"'
    >>> python_terms("raise --synthetic-samples or lower --batch-size")
    'raise synthetic_samples or lower batch_size'
    """
    def keyword(match: re.Match) -> str:
        name, value = match.group(1).replace("-", "_"), match.group(2)
        if value and value not in CONNECTIVES:
            return f'{name}="{value}"'
        return name + (match.group(0)[len(match.group(1)) + 2:] if value else "")

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


noise_warning = analysis.noise  # judged from repeats of a cell and the lone baselines' CIs (see analysis.noise)


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
