"""The seed recipe's CPU work per image, timm's own training transform against the torchvision rewrite the kit used
before (kept here only to compare): images/s on one core, for random images of the stand-in sides.

    python3 benchmarks/archive/transform_speed.py            # needs timm; a table on stdout
"""

from __future__ import annotations

import time

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode, v2

from colloc_kit.worker.recipes import SEED_FLIP, SEED_JITTER, SEED_RATIO, SEED_SCALE, seed_transform

__all__ = ["torchvision_rewrite", "images_per_s"]


def torchvision_rewrite(size: int) -> v2.Compose:
    """The transform the seed recipe had before it used timm's: the same steps on tensors with torchvision's v2."""
    crops = [v2.RandomResizedCrop(size, scale=SEED_SCALE, ratio=SEED_RATIO, interpolation=mode, antialias=True)
             for mode in (InterpolationMode.BILINEAR, InterpolationMode.BICUBIC)]
    return v2.Compose([v2.ToImage(), v2.RandomChoice(crops), v2.RandomHorizontalFlip(SEED_FLIP),
                       v2.ColorJitter(SEED_JITTER, SEED_JITTER, SEED_JITTER), v2.ToDtype(torch.uint8)])


def images_per_s(transform, images: list, rounds: int = 3) -> float:
    """The best of `rounds` passes over `images`, in images/s."""
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for image in images:
            transform(image)
        best = max(best, len(images) / (time.perf_counter() - start))
    return best


if __name__ == "__main__":
    torch.set_num_threads(1)  # as in a loader worker
    rng = np.random.default_rng(0)
    print("| side | timm img/s | rewrite img/s | rewrite vs timm |\n|---|---|---|---|")
    for side in (32, 64, 400):
        images = [Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)) for _ in range(200)]
        timm_rate = images_per_s(seed_transform(224), images)
        rewrite_rate = images_per_s(torchvision_rewrite(224), images)
        print(f"| {side} | {timm_rate:,.0f} | {rewrite_rate:,.0f} | {100 * (rewrite_rate / timm_rate - 1):+.1f} % |")
