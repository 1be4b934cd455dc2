"""Stand-in datasets in the real formats: image files of random pixels, laid out, counted and sized like the real
ones, so the CPU decodes and augments them exactly as it would the real data. Nothing is downloaded.

    colloc-kit data make cifar10 --root /data/standin --images 2000
    colloc-kit run --model resnet26 --dataset imagefolder --data-root /data/standin/cifar10 --device cpu --steps 5

They are an option, never a disguise: each folder holds `STANDIN.txt`, and every job trained on one reports its
dataset as "stand-in files (random pixels, real format)". The layouts are those the seed study's artifact trained on
(timm's folder dataset): ROOT/NAME/train/<class>/<image>.

    >>> make("cifar10", tmp_path, images=20, progress=False)               # doctest: +SKIP
    PosixPath('.../cifar10')
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import atomic
from .errors import BadInput

MARKER = "STANDIN.txt"
LABEL = "stand-in files (random pixels, real format)"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
IMAGENET_TRAIN_IMAGES = 1_281_167
IMAGENET_SIZES = ((500, 375), (500, 333), (375, 500), (500, 400), (400, 300))  # the most common ImageNet sizes
IMAGENET_JPEG_QUALITY = 90


@dataclass(frozen=True)
class Layout:
    """One real dataset's shape: class folders, training images, image sizes, file format."""

    name: str
    classes: tuple[str, ...]
    images: int
    sizes: tuple[tuple[int, int], ...]
    suffix: str
    description: str


def _imagenet_classes() -> tuple[str, ...]:
    return tuple(f"n{i:08d}" for i in range(1000))  # WordNet-id-shaped folder names, one per class


LAYOUTS = {
    "cifar10": Layout("cifar10", CIFAR10_CLASSES, 50_000, ((32, 32),), ".png",
                      "CIFAR-10: 50,000 32x32 PNG in 10 class folders"),
    "imagenet64": Layout("imagenet64", _imagenet_classes(), IMAGENET_TRAIN_IMAGES, ((64, 64),), ".png",
                         "downsampled ImageNet: 64x64 PNG in 1,000 class folders"),
    "imagenet": Layout("imagenet", _imagenet_classes(), IMAGENET_TRAIN_IMAGES, IMAGENET_SIZES, ".JPEG",
                       f"ImageNet: JPEG (quality {IMAGENET_JPEG_QUALITY}) at ImageNet's common sizes, 1,000 classes"),
}


def is_standin(folder: str | Path) -> bool:
    """Whether a dataset folder (or the train/ folder inside one) was made here with random pixels."""
    folder = Path(folder)
    return (folder / MARKER).is_file() or (folder.parent / MARKER).is_file()


def make(name: str, root: str | Path, images: int | None = None, jobs: int | None = None,
         progress: bool = True) -> Path:
    """Write the stand-in for dataset `name` under ROOT/NAME (its real image count unless `images` is given);
    files already there are kept, so an interrupted make resumes. Returns the folder to pass as data_root."""
    if name not in LAYOUTS:
        raise BadInput(f"no stand-in for {name!r}; choose one of {', '.join(LAYOUTS)}")
    layout = LAYOUTS[name]
    count = layout.images if images is None else images
    if not isinstance(count, int) or isinstance(count, bool) or count < len(layout.classes):
        raise BadInput(f"--images must be a whole number of at least {len(layout.classes)} (one per class of "
                       f"{name}), got {count!r}")
    folder = Path(root) / name
    try:
        (folder / "train").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create {folder / 'train'}: {exc.strerror or exc}; choose a writable --root") from None
    chunks = [(layout.name, str(folder / "train" / cls), c, _share(count, len(layout.classes), c))
              for c, cls in enumerate(layout.classes)]
    workers = jobs or max(1, min(len(os.sched_getaffinity(0)), 32))
    from tqdm.auto import tqdm  # noqa: PLC0415 - only when writing: the worker imports this module

    with ProcessPoolExecutor(max_workers=workers) as pool, tqdm(total=count, unit="img", disable=not progress,
                                                                  desc=f"stand-in {name}") as bar:
        for written in pool.map(_write_class, chunks, chunksize=max(1, len(chunks) // (4 * workers))):
            bar.update(written)
    (folder / MARKER).write_text(f"{LABEL}: {layout.description}; {count} training images, made by "
                                 f"`colloc-kit data make {name}`. Not the real {name}: random pixels.\n")
    return folder


def _share(total: int, parts: int, index: int) -> int:
    """Images of class `index` when `total` are spread over `parts` classes as evenly as whole numbers allow."""
    return total // parts + (1 if index < total % parts else 0)


def _write_class(chunk: tuple[str, str, int, int]) -> int:
    """Write one class folder's images (a process of the pool); returns how many it held in the end."""
    import numpy as np  # noqa: PLC0415 - in the writing processes only
    from PIL import Image  # noqa: PLC0415 - in the writing processes only

    name, class_dir, class_index, count = chunk
    layout = LAYOUTS[name]
    folder = Path(class_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(class_index)
    for i in range(count):
        path = folder / f"{folder.name}_{i}{layout.suffix}"
        width, height = layout.sizes[int(rng.integers(len(layout.sizes)))]
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        if path.exists():
            continue
        with atomic.replacing(path) as tmp:  # a killed make leaves no half-written image behind
            if layout.suffix == ".JPEG":
                Image.fromarray(pixels).save(tmp, format="JPEG", quality=IMAGENET_JPEG_QUALITY)
            else:
                Image.fromarray(pixels).save(tmp, format="PNG")
    return count
