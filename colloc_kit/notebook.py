"""What every experiment notebook does after its parameters cell: resolve the device, fit the jobs to it, set plotly up.

    >>> setup = prepare(device="auto", models=["resnet18"], job={"amp": "bf16", "seconds": 10}, plotly_renderer="")
    >>> setup.device, setup.models, setup.job["device"]          # on a machine without a GPU   # doctest: +SKIP
    ('cpu', ['smallcnn'], 'cpu')

With DEVICE = "auto" on a machine without a CUDA GPU the notebook trains TINY_CPU_JOB instead (a small CNN on
synthetic 32x32 images for a few steps) and says so; an explicit DEVICE = "cpu" runs what the parameters say.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import plots

TINY_CPU_MODELS = ["smallcnn"]
TINY_CPU_JOB = {"dataset": "synthetic", "amp": "off", "batch_size": 16, "image_size": 32, "synthetic_samples": 128,
                "steps": 8, "warmup_steps": 2, "workers": 0}


@dataclass(frozen=True)
class Setup:
    device: str  # "cuda" or "cpu"
    models: list[str]
    job: dict  # JobSpec fields every job of the notebook gets (device included)
    tiny: bool  # True where TINY_CPU_JOB replaced the parameters
    gpu: bool  # True where torch sees a CUDA GPU


def prepare(device: str, models: list[str], job: dict, plotly_renderer: str = "") -> Setup:
    """Resolve DEVICE ("auto", "cuda", "cpu"), substitute the tiny CPU job where "auto" finds no GPU, set the renderer."""
    import torch

    plots.use_renderer(plotly_renderer)
    gpu = torch.cuda.is_available()
    if device == "auto" and not gpu:
        print("No CUDA GPU on this machine: running tiny CPU experiments instead of the parameters' "
              f"({', '.join(TINY_CPU_MODELS)} on synthetic 32x32 images, {TINY_CPU_JOB['steps']} steps). "
              "The numbers show the method, not GPU behaviour.")
        return Setup("cpu", list(TINY_CPU_MODELS), {**TINY_CPU_JOB, "device": "cpu"}, tiny=True, gpu=False)
    resolved = ("cuda" if gpu else "cpu") if device == "auto" else device
    print(f"device: {resolved}" + ("" if gpu else " (no CUDA GPU on this machine)"))
    return Setup(resolved, list(models), {**job, "device": resolved}, tiny=False, gpu=gpu)
