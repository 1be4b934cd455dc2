"""The models a worker trains: torchvision architectures with fresh weights, a tiny CNN for quick CPU runs, and
any timm model as `timm.<name>` (`pip install 'colloc-kit[timm]'`): the seed study trained timm's models, e.g.
`timm.resnet26`, `timm.cait_xxs24_224`, `timm.efficientnetv2_s`.

`resnet26` without the prefix is built from torchvision's ResNet with Bottleneck blocks [2, 2, 2, 2]: the layers of
timm's `resnet26` (16.0 M parameters for 1,000 classes in both); they differ in initialisation only (timm zeroes
the last BatchNorm of each block), which changes no step time.

This module imports torch only when a model is built, and timm only for a timm name, so checking stays cheap::

    >>> check_model("resnet26", image_size=32)
    >>> model = build_model("resnet26", num_classes=10, image_size=32)   # doctest: +SKIP
    >>> model = build_model("timm.cait_xxs24_224", num_classes=1000, image_size=224)   # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
from typing import Any

from colloc_kit.errors import BadInput

__all__ = ["DEFAULT_MIN_IMAGE_SIZE", "MIN_IMAGE_SIZE", "MODEL_NAMES", "TIMM_INSTALL", "TIMM_PREFIX",
           "TORCHVISION_MODELS", "VIT_PATCH", "build_model", "check_model", "require_timm"]

TORCHVISION_MODELS = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "efficientnet_v2_s", "vit_b_16",
)
MODEL_NAMES = (*TORCHVISION_MODELS, "resnet26", "smallcnn")
VIT_PATCH = 16
MIN_IMAGE_SIZE = {"smallcnn": 4, "vit_b_16": VIT_PATCH}  # the others halve the input 5 times: 32 pixels or more
DEFAULT_MIN_IMAGE_SIZE = 32
TIMM_PREFIX = "timm."
TIMM_INSTALL = "pip install 'colloc-kit[timm]' (or pip install timm)"


def check_model(name: str, image_size: int) -> None:
    """Refuse (BadInput) an unknown model name, or an image size the model cannot take."""
    if name.startswith(TIMM_PREFIX):
        _check_timm(name.removeprefix(TIMM_PREFIX), image_size)
        return
    if name not in MODEL_NAMES:
        raise BadInput(f"unknown model {name!r}; valid models: {', '.join(MODEL_NAMES)}, or a timm model as "
                       f"{TIMM_PREFIX}<name> (e.g. timm.resnet26)")
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
    if name.startswith(TIMM_PREFIX):
        import timm  # noqa: PLC0415 - optional (colloc-kit[timm]), only for timm models

        return timm.create_model(name.removeprefix(TIMM_PREFIX), pretrained=False, num_classes=num_classes,
                                 **_timm_size(name.removeprefix(TIMM_PREFIX), image_size))
    if name == "smallcnn":
        return _small_cnn(num_classes)
    import torchvision  # noqa: PLC0415 - heavy: loaded when a model is built

    if name == "resnet26":  # the seed study's small model: ResNet with Bottleneck blocks [2, 2, 2, 2]
        from torchvision.models.resnet import Bottleneck, ResNet  # noqa: PLC0415 - heavy: loaded when a model is built

        return ResNet(Bottleneck, [2, 2, 2, 2], num_classes=num_classes)
    extra = {"image_size": image_size} if name == "vit_b_16" else {}
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes, **extra)


def _small_cnn(num_classes: int) -> Any:
    """Two conv blocks and a linear head: 20k parameters for 10 classes, any input size of 4 pixels or more."""
    from torch import nn  # noqa: PLC0415 - heavy: loaded when a model is built

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes),
    )


def require_timm(what: str) -> None:
    """Refuse (BadInput) `what` where timm is not installed, saying how to install it."""
    if importlib.util.find_spec("timm") is None:
        raise BadInput(f"{what} needs timm, which is not installed; {TIMM_INSTALL}")


def _check_timm(name: str, image_size: int) -> None:
    require_timm(f"model {TIMM_PREFIX}{name}")
    import timm  # noqa: PLC0415 - optional (colloc-kit[timm]), only for timm models

    if not timm.is_model(name):
        close = timm.list_models(f"*{name[:6]}*")[:8]
        raise BadInput(f"timm has no model {name!r}" + (f"; close names: {', '.join(close)}" if close else "")
                       + "; see timm.list_models()")
    if image_size < DEFAULT_MIN_IMAGE_SIZE:
        raise BadInput(f"{TIMM_PREFIX}{name} needs images of at least {DEFAULT_MIN_IMAGE_SIZE} pixels, got "
                       f"image_size {image_size}; use e.g. --image-size 224")


def _timm_size(name: str, image_size: int) -> dict:
    """timm's `img_size` argument where a model is built for one input size (vision transformers such as CaiT)."""
    import timm  # noqa: PLC0415 - optional (colloc-kit[timm]), only for timm models

    fixed = timm.get_pretrained_cfg_value(name, "fixed_input_size")
    default = (timm.get_pretrained_cfg_value(name, "input_size") or (3, 224, 224))[-1]
    return {"img_size": image_size} if fixed and image_size != default else {}
