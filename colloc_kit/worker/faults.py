"""What is wrong with a damaged dataset file: the loaders ask here, and raise `DamagedData` naming the file, what is
wrong with it and how to make a good one (not the raw unpickling, index or image error)::

    >>> cifar10_fault(Path("/data/cifar-10-batches-py"))   # doctest: +SKIP
    DamagedData('/data/cifar-10-batches-py/data_batch_2 is empty (0 bytes): the file is damaged; replace it ...')
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from torchvision.datasets.folder import default_loader

from colloc_kit.errors import DamagedData
from colloc_kit.worker.datasets import CIFAR10_FILES, NUM_CLASSES, damaged

__all__ = ["CIFAR10_ROW", "IMAGENET64_ROW", "cifar10_fault", "imagenet64_labels", "read_image"]

CIFAR10_ROW, IMAGENET64_ROW = 3 * 32 * 32, 3 * 64 * 64  # values in one image's row: 3 planes of 32x32, of 64x64


def cifar10_fault(folder: Path) -> DamagedData | None:
    """The first file of a CIFAR-10 copy that a training set cannot be read from, as its error; None where each
    training batch and batches.meta read as CIFAR-10's."""
    for name in (*(n for n in CIFAR10_FILES if n.startswith("data_batch")), "batches.meta"):
        path = folder / name
        try:
            with open(path, "rb") as f:
                entry = pickle.load(f, encoding="latin1")
        except Exception as exc:  # noqa: BLE001 - whatever unpickling raises, the file is what is wrong
            if path.is_file() and path.stat().st_size == 0:
                return damaged(path, "cifar10", "is empty (0 bytes)")
            return damaged(path, "cifar10", f"cannot be read as a CIFAR-10 pickle, truncated or not one "
                                            f"({type(exc).__name__}: {exc})")
        what = _meta_fault(entry) if name == "batches.meta" else _batch_fault(entry)
        if what:
            return damaged(path, "cifar10", what)
    return None


def _meta_fault(entry: Any) -> str | None:
    names = entry.get("label_names") if isinstance(entry, dict) else None
    if not isinstance(names, list) or len(names) != NUM_CLASSES["cifar10"]:
        return f"does not hold CIFAR-10's {NUM_CLASSES['cifar10']} label_names"
    return None


def _batch_fault(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("data"), np.ndarray):
        return "holds no 'data' array of images"
    data, labels = entry["data"], entry.get("labels")
    if data.ndim != 2 or data.shape[1] != CIFAR10_ROW:
        return f"holds rows of shape {data.shape[1:]}; CIFAR-10's rows are {CIFAR10_ROW} values (3 planes of 32x32)"
    if not isinstance(labels, list) or len(labels) != len(data):
        return f"holds {len(data)} images but {len(labels) if isinstance(labels, list) else 'no list of'} labels"
    return None


def imagenet64_labels(path: Path) -> np.ndarray:
    """The 0-based labels of one downsampled-ImageNet npz batch, once its images and labels agree (DamagedData
    otherwise): uint8 rows of 12,288 values, one per label, at least one."""
    try:
        with np.load(path) as npz:
            labels = np.asarray(npz["labels"], dtype=np.int64).reshape(-1) - 1
        with zipfile.ZipFile(path) as archive, archive.open("data.npy") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise damaged(path, "imagenet64", f"cannot be read as a downsampled-ImageNet npz ({exc})") from None
    if len(shape) != 2 or shape[1] != IMAGENET64_ROW or dtype != np.uint8:
        raise damaged(path, "imagenet64", f"holds 'data' of {dtype} {shape}; the 64x64 format has uint8 rows of "
                                          f"{IMAGENET64_ROW} values (3 planes of 64x64)")
    if shape[0] == 0:
        raise damaged(path, "imagenet64", "holds no image")
    if shape[0] != len(labels):
        raise damaged(path, "imagenet64", f"holds {shape[0]} images but {len(labels)} labels")
    return labels


def read_image(path: str) -> Any:
    """One image of an image folder as RGB (torchvision's loader); DamagedData where the file is truncated or not
    an image. A file gone or forbidden stays an OSError: `reasons` says what to do about those."""
    try:
        return default_loader(path)
    except (OSError, SyntaxError) as exc:  # PIL: "Truncated File Read", "image file is truncated", not an image
        if isinstance(exc, OSError) and exc.errno is not None:
            raise
        raise damaged(path, "imagefolder", f"cannot be read as an image, truncated or not one ({exc})") from None
