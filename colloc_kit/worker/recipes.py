"""Training recipes: how a job turns files into batches and batches into updates, beyond its model and budget.

- `kit`: the kit's own light recipe. Each dataset's usual augmentation at its own size (CIFAR-style crop and flip,
  ImageNet-style random resized crop), normalised on the CPU; SGD with momentum; plain cross-entropy.
- `seed`: the seed study's timm `train.py` as it was run (../shared/SEED_ARTIFACT.md). timm's own training
  transform on the CPU, built by timm's `create_transform` with train.py's defaults (random resized crop to 224 with
  scale 0.08-1 and a random choice of bilinear or bicubic interpolation, horizontal flip 0.5, colour jitter 0.4), the
  loader yielding uint8 images that the GPU converts and normalises (timm's "prefetcher"); SGD with momentum 0.9 and
  weight decay 2e-5; label smoothing 0.1. It needs timm, as the study's models do; the learning rate does not change
  throughput and stays the job's own. (The kit's earlier torchvision rewrite of this transform was 6 % slower per
  core on 32-px images and 22 % faster on 400-px ones: `benchmarks/archive/transform_speed.py`.)

    >>> RECIPES["seed"].weight_decay, RECIPES["seed"].label_smoothing
    (2e-05, 0.1)
    >>> transform = seed_transform(224)                     # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch
    from torchvision import transforms

__all__ = ["IMAGENET_NORM", "RECIPES", "Recipe", "SEED_FLIP", "SEED_JITTER", "SEED_RATIO", "SEED_SCALE",
           "device_normaliser", "seed_transform"]

IMAGENET_NORM = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
SEED_SCALE, SEED_RATIO, SEED_FLIP, SEED_JITTER = (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 0.4  # timm's training defaults


@dataclass(frozen=True)
class Recipe:
    """What a recipe sets besides the transform: the optimizer's weight decay, the loss's label smoothing, and
    whether the loader hands uint8 images to the device to convert and normalise there."""

    name: str
    weight_decay: float
    label_smoothing: float
    normalise_on_device: bool


RECIPES = {
    "kit": Recipe("kit", weight_decay=0.0, label_smoothing=0.0, normalise_on_device=False),
    "seed": Recipe("seed", weight_decay=2e-5, label_smoothing=0.1, normalise_on_device=True),
}


def seed_transform(size: int) -> transforms.Compose:
    """timm's own training transform as train.py builds it (`create_transform(size, is_training=True)` with its
    default flags and `--train-interpolation random`), ending in a uint8 CHW tensor as timm's prefetching loader
    yields it."""
    from timm.data import create_transform  # noqa: PLC0415 - optional (colloc-kit[timm]), only for this recipe

    return create_transform(size, is_training=True, scale=SEED_SCALE, ratio=SEED_RATIO, hflip=SEED_FLIP,
                            color_jitter=SEED_JITTER, interpolation="random", use_prefetcher=True)


def device_normaliser(device: torch.device,
                      memory_format: torch.memory_format) -> Callable[[torch.Tensor], torch.Tensor]:
    """uint8 images on the device -> float, ImageNet-normalised, in `memory_format` (timm's prefetcher step)."""
    import torch  # noqa: PLC0415 - heavy: loaded when a job is built

    mean = torch.tensor([m * 255 for m in IMAGENET_NORM[0]], device=device).view(1, 3, 1, 1)
    std = torch.tensor([s * 255 for s in IMAGENET_NORM[1]], device=device).view(1, 3, 1, 1)

    def normalise(images: torch.Tensor) -> torch.Tensor:
        return ((images.float() - mean) / std).contiguous(memory_format=memory_format)

    return normalise
