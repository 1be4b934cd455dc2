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

from . import analysis, background, plots
from .errors import CollocKitError
from .tables import number, table

__all__ = ["TINY_CPU_MODELS", "TINY_CPU_JOB", "Setup", "prepare", "INTERRUPTED_NOTICE", "NOISE_LIMIT", "python_terms",
           "one_line", "install_notices", "noise_warning", "WARNING", "warn", "number", "table"]

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
NOISE_LIMIT = 1.25  # identical jobs of one run differing more than this (fastest / slowest): gains are not measurable


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


def noise_warning(jobs: pd.DataFrame, summary: pd.DataFrame | None = None, limit: float = NOISE_LIMIT) -> str | None:
    """A warning when the measurements cannot be compared, as with tiny CPU runs on a busy machine: identical copies
    of one job in one run differing by more than `limit` in images/s, or (in `summary`, the `analysis.summarize` of
    the same results) a configuration "gaining" more than its jobs can give: n jobs at once at most n times one job
    alone, jobs one after another (exclusive) at most once. None when neither happens.

    A mix's jobs are not compared with each other: beside a larger job, two copies of a small one may get unequal
    shares of the GPU, which is a result (how fairly a mode shares), not noise.

    >>> jobs = pd.DataFrame({"run_id": ["r", "r"], "model": ["m", "m"], "batch_size": [8, 8],
    ...                      "status": ["complete"] * 2, "images_per_s": [100.0, 210.0]})
    >>> noise_warning(jobs)                                               # doctest: +ELLIPSIS
    'identical jobs of one run differ 2.1x in images/s: this machine is too noisy to compare modes ...'
    """
    done = jobs[(jobs["status"] == analysis.COMPLETE) & jobs["images_per_s"].notna()] if len(jobs) else jobs
    if done.empty:
        return None
    warnings = []
    copies = done.groupby("run_id")[["model", "batch_size"]].transform("nunique").max(axis=1) == 1  # not a mix
    rates = done[copies].groupby(["run_id", "model", "batch_size"])["images_per_s"]
    spread = (rates.max() / rates.min())[rates.count() > 1]
    worst = spread.max() if len(spread) else 1.0
    if worst > limit:
        warnings.append(f"identical jobs of one run differ {worst:.1f}x in images/s: this machine is too noisy to "
                        f"compare modes (gains under {worst:.1f}x are noise)")
    impossible = _impossible_gain(summary, limit) if summary is not None and len(summary) else None
    return "; ".join(warnings + ([impossible] if impossible else [])) or None


def _impossible_gain(summary: pd.DataFrame, limit: float) -> str | None:
    """The configuration that gained most beyond what its jobs can give, said in a sentence; None if none did."""
    jobs = summary["n_jobs"] if "n_jobs" in summary else summary["copies"]
    one_after_another = summary["mode"].eq("exclusive") if "mode" in summary else pd.Series(False, summary.index)
    most = jobs.where(~one_after_another, 1).astype(float)
    excess = summary["normalized_throughput_mean"].astype(float) / most
    if not (excess > limit).any():
        return None
    row, n = summary.loc[excess.idxmax()], int(most[excess.idxmax()])
    mode = row.get("mode_label", row.get("mode", ""))
    label = f"{mode} x{int(row['copies'])}" if n == int(row["copies"]) or n == 1 else \
        f"{mode} of {row.get('jobs_label') or f'{n} jobs'}"
    can = "one after another, jobs can give at most 1x" if one_after_another[excess.idxmax()] else \
        f"{n} jobs at once can give at most {n}x"
    return (f"{label} trained {row['normalized_throughput_mean']:.1f}x one job alone, more than sharing can give "
            f"({can}): these measurements are noise (too short a steady window, or a busy machine); give the jobs "
            "more steps, or measure on a quieter machine")


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
