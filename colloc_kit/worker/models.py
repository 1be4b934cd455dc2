"""The models a worker trains: torchvision architectures with fresh weights, and a tiny CNN for quick CPU runs.

This module imports torch only when a model is built, so checking a name stays cheap::

    >>> check_model("resnet26", image_size=32)
    >>> model = build_model("resnet26", num_classes=10, image_size=32)   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ..errors import BadInput

TORCHVISION_MODELS = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "efficientnet_v2_s", "vit_b_16",
)
MODEL_NAMES = (*TORCHVISION_MODELS, "resnet26", "smallcnn")
VIT_PATCH = 16
MIN_IMAGE_SIZE = {"smallcnn": 4, "vit_b_16": VIT_PATCH}  # the others halve the input 5 times: 32 pixels or more
DEFAULT_MIN_IMAGE_SIZE = 32


def check_model(name: str, image_size: int) -> None:
    """Refuse (BadInput) an unknown model name, or an image size the model cannot take."""
    if name not in MODEL_NAMES:
        raise BadInput(f"unknown model {name!r}; valid models: {', '.join(MODEL_NAMES)}")
    smallest = MIN_IMAGE_SIZE.get(name, DEFAULT_MIN_IMAGE_SIZE)
    if image_size < smallest:
        raise BadInput(f"{name} needs images of at least {smallest} pixels, got image_size {image_size}; "
                       f"use e.g. --image-size {max(smallest, 32)}")
    if name == "vit_b_16" and image_size % VIT_PATCH:
        raise BadInput(f"vit_b_16 cuts images into {VIT_PATCH}-pixel patches, so image_size must be a multiple of "
                       f"{VIT_PATCH}; got {image_size}; use e.g. --image-size 224")


def build_model(name: str, num_classes: int, image_size: int) -> Any:
    """A freshly initialised `torch.nn.Module` (weights=None) with `num_classes` outputs."""
    check_model(name, image_size)
    import torchvision

    if name == "smallcnn":
        return _small_cnn(num_classes)
    if name == "resnet26":  # the seed study's small model: ResNet with Bottleneck blocks [2, 2, 2, 2]
        from torchvision.models.resnet import Bottleneck, ResNet

        return ResNet(Bottleneck, [2, 2, 2, 2], num_classes=num_classes)
    extra = {"image_size": image_size} if name == "vit_b_16" else {}
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes, **extra)


def _small_cnn(num_classes: int) -> Any:
    """Two conv blocks and a linear head: 20k parameters for 10 classes, any input size of 4 pixels or more."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes),
    )
