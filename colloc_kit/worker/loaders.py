"""Batches for the worker: device-resident synthetic data here, real torchvision loaders for data on disk
(`disk_data`, imported only for a job that reads files, so that a synthetic job's worker and its zygote never load
torchvision's datasets).

A Feed hands out one epoch at a time as an iterator of (images, labels) already on the device, and `close()` ends
its loader worker processes (a feed swap, `worker.train`)::

    >>> feed = build_feed(JobSpec(model="smallcnn", device="cpu", batch_size=32), torch.device("cpu"))
    >>> feed.label, feed.steps_per_epoch
    ('synthetic (random tensors made once on the device, 2048 images per epoch)', 64)
    >>> feed.close()
"""

from __future__ import annotations

from typing import Iterator

import torch

from colloc_kit.spec import JobSpec
from colloc_kit.worker.datasets import NUM_CLASSES, image_side, locate
from colloc_kit.worker.feed import Feed

__all__ = ["build_feed"]


def build_feed(spec: JobSpec, device: torch.device, synthetic_classes: int = NUM_CLASSES["synthetic"]) -> Feed:
    """The Feed for `spec.dataset` (synthetic labels drawn from `synthetic_classes`: a swapped feed keeps the model's
    head); BadInput if the data is absent, malformed, or smaller than one batch."""
    folder = locate(spec.dataset, spec.data_root)
    size = image_side(spec.dataset, spec.image_size, spec.model, spec.device)
    memory_format = torch.channels_last if spec.channels_last else torch.contiguous_format
    if folder is None:
        return _synthetic(spec, size, device, memory_format, synthetic_classes)
    from colloc_kit.worker.disk_data import disk_feed  # noqa: PLC0415 - torchvision: only for data on disk

    return disk_feed(spec, folder, size, device, memory_format)


def _synthetic(spec: JobSpec, size: int, device: torch.device, memory_format: torch.memory_format,
               num_classes: int) -> Feed:
    """One batch of random images and labels (of `num_classes`), made once on the device and reused: no input
    pipeline at all."""
    generator = torch.Generator(device).manual_seed(spec.seed)
    images = torch.randn(spec.batch_size, 3, size, size, device=device, generator=generator)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, num_classes, (spec.batch_size,), device=device, generator=generator)
    steps = spec.synthetic_samples // spec.batch_size

    def epoch() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter([(images, labels)] * steps)

    label = f"synthetic (random tensors made once on the device, {steps * spec.batch_size} images per epoch)"
    return Feed(epoch, steps, num_classes, size, label)
