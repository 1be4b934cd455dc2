"""The training worker: one real training job in its own process, reporting JSON-line events on stdout.

    process      the worker's command line and its life: barrier, events, the end (`python -m colloc_kit.worker`)
    train        the training loop that emits the events
    stdin        the launcher's side of the worker's stdin: the barrier, then stop, pause, go, feed, EOF
    meter        the measured window: steps against the budget, intervals, epochs, why the window ended
    serve        an inference job's loop (`role: serve`): requests served in order, each one's latency in the events
    models       the models (torchvision, timm, tiny CPU ones), built by name
    datasets     the datasets by name, where their files are, what size their images have
    feed         a job's feed: where its batches come from (`Feed`)
    loaders      a job's feed made: device-resident synthetic data, else the disk data's
    disk_data    data on disk through torchvision's loaders and workers, with each recipe's transform
    faults       what is wrong with a damaged dataset file, named with how to make a good one
    recipes      the study's recipe (224 px, its augmentations) and the kit's
    reasons      a failed job's reason in words: what went wrong and what to do
    standin      stand-in datasets in the real formats (random pixels, labelled so)
    zygote       a process that imports torch once and forks the workers of a lane: the kit's side (`Zygote`)
    zygote_process  the zygote process itself: imports once, checks forking is safe, forks and becomes each worker

Run it alone, or let the launcher start it behind a start barrier::

    python -m colloc_kit.worker --model resnet50 --dataset synthetic --batch-size 128 --epochs 2 --amp bf16

Importing this package is cheap (no torch): the launcher calls `check_job` before anything starts::

    >>> check_job(JobSpec(model="resnet26", dataset="cifar10", data_root="/data", device="cpu"))   # doctest: +SKIP
"""

from __future__ import annotations

import psutil

from colloc_kit.errors import BadInput, NvmlUnavailable
from colloc_kit.gpu import nvml
from colloc_kit.spec import JobSpec
from colloc_kit.worker.datasets import DATASET_NAMES, image_side, locate
from colloc_kit.worker.models import MODEL_NAMES, check_model, require_timm

__all__ = ["check_job", "require_gpu", "MODEL_NAMES", "DATASET_NAMES"]

NO_CUDA = "CUDA is not available on this machine{why}; use --device cpu"


def check_job(spec: JobSpec) -> None:
    """Refuse (BadInput) a job that cannot run here: unknown model, absent or malformed data, one batch larger than
    this machine's memory, the seed recipe without timm, no CUDA."""
    locate(spec.dataset, spec.data_root)
    side = image_side(spec.dataset, spec.image_size, spec.model, spec.device)
    check_model(spec.model, side)
    batch_bytes = spec.batch_size * 3 * side * side * 4  # one batch of float32 RGB images, as the loader collates it
    if batch_bytes > (memory := psutil.virtual_memory().total):
        raise BadInput(f"one batch of {spec.batch_size:,} images of {side:,} x {side:,} px needs "
                       f"{batch_bytes / 2**30:,.0f} GiB to hold, more than this machine's {memory / 2**30:,.0f} GiB of "
                       "memory; lower --batch-size or --image-size")
    if spec.recipe == "seed":
        require_timm("the seed recipe (timm's own training transform)")
    if spec.dataset == "synthetic" and spec.synthetic_samples < spec.batch_size:
        raise BadInput(f"synthetic_samples ({spec.synthetic_samples}) is smaller than one batch ({spec.batch_size}); "
                       "raise --synthetic-samples or lower --batch-size")
    if spec.device == "cuda":
        require_gpu()


def require_gpu() -> None:
    """BadInput where this machine has no CUDA GPU. Asks NVML, not CUDA: initialising CUDA in the launcher would make
    it a client of whatever mode runs next."""
    try:
        with nvml.session() as lib:
            count = lib.nvmlDeviceGetCount()
    except NvmlUnavailable as exc:
        raise BadInput(NO_CUDA.format(why=f" ({exc})")) from None
    if count == 0:
        raise BadInput(NO_CUDA.format(why=" (NVML sees no GPU)"))
