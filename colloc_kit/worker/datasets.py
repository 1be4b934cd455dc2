"""Where each dataset lives on disk, and whether what is there has the expected format.

Cheap checks only (no torch, no image decoding): the launcher runs them before anything starts. Nothing is ever
downloaded; an absent dataset is refused with where the kit looked, what it expected, and where to get it::

    >>> locate("cifar10", "/data")                       # doctest: +SKIP
    PosixPath('/data/cifar-10-batches-py')
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from colloc_kit.errors import BadInput, DamagedData

__all__ = ["CIFAR10_FILES", "CIFAR10_FOLDER", "DATASET_NAMES", "HOW_TO_GET", "IMAGENET64_KEYS", "IMAGENET64_PATTERN",
           "IMAGE_SUFFIXES", "NATIVE_IMAGE_SIZE", "NUM_CLASSES", "SMALL_SYNTHETIC_SIDE", "damaged",
           "image_side", "imagenet64_files", "locate"]

DATASET_NAMES = ("synthetic", "cifar10", "imagefolder", "imagenet64")
NATIVE_IMAGE_SIZE = {"synthetic": 224, "cifar10": 32, "imagefolder": 224, "imagenet64": 64}
SMALL_SYNTHETIC_SIDE = 32  # synthetic images for smallcnn or the CPU: a quick run takes seconds, not minutes
NUM_CLASSES = {"synthetic": 1000, "cifar10": 10, "imagenet64": 1000}  # imagefolder: one class per subfolder

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")
IMAGENET64_PATTERN = "train_data_batch_*.npz"
IMAGENET64_KEYS = ("data", "labels")
# torchvision's IMG_EXTENSIONS (what ImageFolder accepts), here so that checking needs no torch
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

HOW_TO_GET = {
    "cifar10": "download the CIFAR-10 python version (cifar-10-python.tar.gz) from "
               "https://www.cs.toronto.edu/~kriz/cifar.html "
               f"and unpack it so that DATA_ROOT/{CIFAR10_FOLDER}/ holds {', '.join(CIFAR10_FILES)}",
    "imagefolder": "arrange images as DATA_ROOT/<class name>/<image file> (or DATA_ROOT/train/<class>/<image>), "
                   "e.g. the ImageNet training set from https://image-net.org/download.php",
    "imagenet64": "download 'Imagenet64_train' (npz format) of the downsampled ImageNet from "
                  "https://image-net.org/download-images.php (Chrabaszcz et al. 2017) and unpack it so that DATA_ROOT "
                  "(or a folder inside it) holds train_data_batch_1.npz ... train_data_batch_10.npz",
}
STANDIN_NAME = {"cifar10": "cifar10", "imagenet64": "imagenet64", "imagefolder": "imagenet"}  # `data make` NAME


def damaged(path: str | Path, dataset: str, what: str) -> DamagedData:
    """The error for a damaged file of `dataset`: the file, what is wrong, and how to make a good one.

    >>> str(damaged("d/data_batch_2", "cifar10", "is empty"))  # doctest: +ELLIPSIS
    'd/data_batch_2 is empty: the file is damaged; replace it (download the CIFAR-10 ...), or make a stand-in ...'
    """
    name = STANDIN_NAME[dataset]
    return DamagedData(f"{path} {what}: the file is damaged; replace it ({HOW_TO_GET[dataset]}), or make a stand-in "
                       f"in the real layout with `colloc-kit data make {name} --root DIR` and train on it with "
                       f"--dataset imagefolder --data-root DIR/{name}", path=path)


def image_side(dataset: str, image_size: int | None, model: str, device: str) -> int:
    """The input side a job trains at: its own image_size, else 32 px for synthetic data on the CPU or for smallcnn,
    else the dataset's native side.

    >>> image_side("synthetic", None, "smallcnn", "cuda"), image_side("synthetic", None, "resnet18", "cuda")
    (32, 224)
    """
    if image_size:
        return image_size
    if dataset == "synthetic" and (model == "smallcnn" or device == "cpu"):
        return SMALL_SYNTHETIC_SIDE
    return NATIVE_IMAGE_SIZE[dataset]


def locate(dataset: str, data_root: str | None) -> Path | None:
    """The folder the loader reads (None for synthetic); BadInput if it is absent or not in the expected format."""
    if dataset not in DATASET_NAMES:
        raise BadInput(f"unknown dataset {dataset!r}; valid datasets: {', '.join(DATASET_NAMES)}")
    if dataset == "synthetic":
        return None
    if data_root is None:
        raise BadInput(f"dataset {dataset} needs --data-root (nothing is downloaded); {HOW_TO_GET[dataset]}")
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise BadInput(f"data root {root} for dataset {dataset} does not exist or is not a folder; "
                       f"{HOW_TO_GET[dataset]}")
    return {"cifar10": _cifar10, "imagefolder": _imagefolder, "imagenet64": _imagenet64}[dataset](root)


def imagenet64_files(folder: Path) -> list[Path]:
    """The npz batch files of downsampled ImageNet in `folder`, in batch order (1, 2, ..., 10)."""
    numbered = [p for p in folder.glob(IMAGENET64_PATTERN) if p.stem.rsplit("_", 1)[1].isdigit()]  # not *_old.npz
    return sorted(numbered, key=lambda p: int(p.stem.rsplit("_", 1)[1]))


def _cifar10(root: Path) -> Path:
    candidates = [root / CIFAR10_FOLDER] + ([root] if root.name == CIFAR10_FOLDER else [])
    for folder in candidates:
        if folder.is_dir():
            missing = [name for name in CIFAR10_FILES if not (folder / name).is_file()]
            if missing:
                raise BadInput(f"CIFAR-10 at {folder} lacks {', '.join(missing)}; {HOW_TO_GET['cifar10']}")
            return folder
    raise BadInput(f"no CIFAR-10 found: looked for {root / CIFAR10_FOLDER}; {HOW_TO_GET['cifar10']}")


def _imagefolder(root: Path) -> Path:
    folder = root / "train" if (root / "train").is_dir() else root
    classes = [d for d in folder.iterdir() if d.is_dir()]
    if not classes:
        raise BadInput(f"no class folders in {folder} (looked in {root}/train, then {root}); "
                       f"{HOW_TO_GET['imagefolder']}")
    empty = sorted(d.name for d in classes if not any(f.suffix.lower() in IMAGE_SUFFIXES for f in d.iterdir()))
    if empty:
        raise BadInput(f"class folder(s) {', '.join(empty[:5])}{' ...' if len(empty) > 5 else ''} in {folder} hold no "
                       f"images ({', '.join(IMAGE_SUFFIXES)}); every class needs at least one, or remove the folder; "
                       f"{HOW_TO_GET['imagefolder']}")
    return folder


def _imagenet64(root: Path) -> Path:
    for folder in (root, *sorted(d for d in root.iterdir() if d.is_dir())):
        files = imagenet64_files(folder)
        if not files:
            continue
        for path in files:
            try:
                with zipfile.ZipFile(path) as archive:
                    members = set(archive.namelist())
            except (zipfile.BadZipFile, OSError) as exc:
                raise BadInput(f"{path} is not a readable npz file ({exc}); {HOW_TO_GET['imagenet64']}") from None
            missing = [key for key in IMAGENET64_KEYS if f"{key}.npy" not in members]
            if missing:
                raise BadInput(f"{path} lacks the array(s) {', '.join(missing)} of the downsampled-ImageNet npz format "
                               f"(found {', '.join(sorted(m.removesuffix('.npy') for m in members))}); "
                               f"{HOW_TO_GET['imagenet64']}")
        return folder
    raise BadInput(f"no downsampled ImageNet 64x64 found: no {IMAGENET64_PATTERN} in {root} or its subfolders; "
                   f"{HOW_TO_GET['imagenet64']}")
