"""Small fake copies of each dataset format on disk, so tests train through the real loaders.

Each writer produces the real on-disk format (CIFAR-10's python pickles, downsampled ImageNet's npz batches,
an ImageFolder tree of PNG files) with random pixels, and returns the path to pass as `data_root`::

    >>> root = write_cifar10(tmp_path / "cifar")               # doctest: +SKIP
    >>> JobSpec(model="smallcnn", dataset="cifar10", data_root=str(root), device="cpu")   # doctest: +SKIP
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def write_cifar10(root: Path, images_per_batch: int = 16, seed: int = 0) -> Path:
    """root/cifar-10-batches-py/ with data_batch_1..5, test_batch and batches.meta as CIFAR-10 pickles them."""
    rng = np.random.default_rng(seed)
    folder = Path(root) / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"batch_label": f"fake {name}",
                 "labels": rng.integers(0, 10, images_per_batch).tolist(),
                 "data": rng.integers(0, 256, (images_per_batch, 3 * 32 * 32), dtype=np.uint8),
                 "filenames": [f"fake_{i}.png" for i in range(images_per_batch)]}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    meta = {"label_names": list(CIFAR10_CLASSES), "num_cases_per_batch": images_per_batch, "num_vis": 3 * 32 * 32}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return Path(root)


def write_imagenet64(root: Path, files: int = 2, images_per_file: int = 24, compressed: bool = False,
                     seed: int = 0) -> Path:
    """root/train_data_batch_1..N.npz: 'data' (n, 12288) uint8 channel-planar, 'labels' 1..1000, 'mean'."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    save = np.savez_compressed if compressed else np.savez
    for i in range(1, files + 1):
        data = rng.integers(0, 256, (images_per_file, 3 * 64 * 64), dtype=np.uint8)
        labels = rng.integers(1, 1001, images_per_file).tolist()
        save(root / f"train_data_batch_{i}.npz", data=data, labels=labels, mean=data.mean(axis=0))
    return root


def write_imagefolder(root: Path, classes: int = 3, images_per_class: int = 8, size: int = 40,
                      train_subfolder: bool = True, seed: int = 0) -> Path:
    """root/train/<class>/<n>.png (or root/<class>/<n>.png): an ImageNet-style folder of random PNG images."""
    from PIL import Image  # noqa: PLC0415 - heavy: only for image files

    rng = np.random.default_rng(seed)
    base = Path(root) / "train" if train_subfolder else Path(root)
    for c in range(classes):
        folder = base / f"class_{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(images_per_class):
            pixels = rng.integers(0, 256, (size, size + 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{n}.png")
    return Path(root)
