"""Batches from data on disk: torchvision's loaders over CIFAR-10, downsampled ImageNet 64x64 and image folders, with
each recipe's training transform, as a `feed.Feed` (`loaders.build_feed` imports this module only for a job that
reads files).

    >>> feed = disk_feed(JobSpec(model="resnet18", dataset="cifar10", data_root="/data"),           # doctest: +SKIP
    ...                  Path("/data/cifar-10-batches-py"), 32, torch.device("cuda"), torch.contiguous_format)
    >>> feed.label                                                                                  # doctest: +SKIP
    'cifar10 (50000 training images from /data/cifar-10-batches-py)'
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator, cast

import numpy as np
import torch
from torchvision.datasets import CIFAR10, ImageFolder
from torchvision.transforms import v2

from colloc_kit.errors import BadInput
from colloc_kit.spec import JobSpec
from colloc_kit.worker.datasets import HOW_TO_GET, NUM_CLASSES, damaged, imagenet64_files
from colloc_kit.worker.faults import cifar10_fault, imagenet64_labels, read_image
from colloc_kit.worker.feed import Feed
from colloc_kit.worker.recipes import IMAGENET_NORM, RECIPES, device_normaliser, seed_transform
from colloc_kit.worker.standin import LABEL as STANDIN_LABEL
from colloc_kit.worker.standin import is_standin

__all__ = ["CIFAR10Files", "CIFAR10_NORM", "IMAGENET64_SIDE", "ImageNet64", "disk_feed"]

CIFAR10_NORM = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
IMAGENET64_SIDE = 64


def disk_feed(spec: JobSpec, folder: Path, size: int, device: torch.device, memory_format: torch.memory_format) -> Feed:
    """The Feed of `spec.dataset` found in `folder`, at `size` pixels; BadInput if the data is malformed or smaller
    than one batch."""
    transform = _train_transform(spec.recipe, spec.dataset, size)
    dataset: CIFAR10Files | ImageNet64 | ImageFolder
    if spec.dataset == "cifar10":
        dataset = CIFAR10Files(str(folder.parent), train=True, transform=transform)
        label = f"cifar10 ({len(dataset)} training images from {folder})"
    elif spec.dataset == "imagenet64":
        dataset = ImageNet64(imagenet64_files(folder), transform)
        label = f"imagenet64 ({len(dataset)} training images, downsampled ImageNet 64x64, from {folder})"
    else:
        try:
            dataset = ImageFolder(str(folder), transform=transform, loader=read_image)
        except FileNotFoundError as exc:
            raise BadInput(f"{exc}; {HOW_TO_GET['imagefolder']}") from None
        label = f"imagefolder ({len(dataset)} images in {len(dataset.classes)} classes from {folder})"
        if is_standin(folder):
            label = f"{STANDIN_LABEL}: {label}"
    if len(dataset) < spec.batch_size:
        raise BadInput(f"{label} has fewer images than one batch of {spec.batch_size}; use a smaller --batch-size")
    loader: torch.utils.data.DataLoader[Any] = torch.utils.data.DataLoader(
        dataset, batch_size=spec.batch_size, shuffle=True, drop_last=True, num_workers=spec.workers,
        pin_memory=spec.pin_memory and device.type == "cuda", persistent_workers=spec.workers > 0,
        generator=torch.Generator().manual_seed(spec.seed))
    if RECIPES[spec.recipe].normalise_on_device:  # uint8 over the bus, converted and normalised on the device
        normalise = device_normaliser(device, memory_format)

        def to_device(images: torch.Tensor) -> torch.Tensor:
            return normalise(images.to(device, non_blocking=True))
    else:
        def to_device(images: torch.Tensor) -> torch.Tensor:
            return images.to(device, non_blocking=True, memory_format=memory_format)

    def epoch() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        batches = iter(loader)  # now, not at the first batch: its workers start loading as soon as an epoch is asked
        return ((to_device(images), labels.to(device, non_blocking=True)) for images, labels in batches)

    def close() -> None:
        """Its persistent loader workers shut down as the DataLoader shuts them down at its end, and reaped."""
        iterator: Any = loader._iterator  # only persistent workers outlive an epoch's iterator
        if iterator is not None:
            iterator._shutdown_workers()
            for process in iterator._workers:
                process.join()
            loader._iterator = None

    num_classes = NUM_CLASSES.get(spec.dataset) or len(cast(ImageFolder, dataset).classes)  # no table entry: a folder
    return Feed(epoch, len(loader), num_classes, size, label, close)


class CIFAR10Files(CIFAR10):
    """torchvision's CIFAR10, checking that its files exist but not their md5 sums.

    The kit never downloads, so the checksums guard nothing here, and skipping them lets small test copies in the
    real pickle format (tests/fake_datasets.py) load through the real class and its real parsing. Where that parsing
    fails, or images and labels disagree, the damaged file is named (`faults.cifar10_fault`).
    """

    train_list = [[name, None] for name, _ in CIFAR10.train_list]
    test_list = [[name, None] for name, _ in CIFAR10.test_list]
    meta = {**CIFAR10.meta, "md5": None}

    def __init__(self, root: str, train: bool = True, transform: Callable | None = None) -> None:
        folder = Path(root) / self.base_folder
        try:
            super().__init__(root, train=train, transform=transform)
        except Exception:
            fault = cifar10_fault(folder)  # a damaged file named, with what is wrong (else torch's own error)
            if fault is None:
                raise
            raise fault from None
        if len(self.data) != len(self.targets):
            raise cifar10_fault(folder) or damaged(folder, "cifar10", f"holds {len(self.data)} images but "
                                                                      f"{len(self.targets)} labels")


class ImageNet64(torch.utils.data.Dataset):
    """Downsampled ImageNet 64x64 from its npz batch files: 'data' (N, 12288) uint8 channel-planar, 'labels' 1-based.

    Arrays stored uncompressed in the npz (np.savez) are memory-mapped, so copies of a job share the page cache
    instead of each holding the 15 GB of images; compressed ones (np.savez_compressed) are read into memory.

    >>> ds = ImageNet64(imagenet64_files(Path("/data/imagenet64")))   # doctest: +SKIP
    >>> image, label = ds[0]     # (3, 64, 64) uint8 tensor, label in 0..999   # doctest: +SKIP
    """

    def __init__(self, files: list[Path], transform: Callable | None = None):
        self.files, self.transform = list(files), transform
        labels = [imagenet64_labels(path) for path in self.files]  # DamagedData where images and labels disagree
        self.targets = np.concatenate(labels)
        if self.targets.min() < 0 or self.targets.max() >= NUM_CLASSES["imagenet64"]:
            raise BadInput(f"labels of {self.files[0].parent} run from {self.targets.min() + 1} to "
                           f"{self.targets.max() + 1}; the downsampled-ImageNet format numbers classes 1..1000")
        self.starts = np.cumsum([0] + [len(x) for x in labels])
        self._parts: list[np.ndarray] | None = None  # opened lazily, in each loader process

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> tuple[Any, int]:
        if self._parts is None:
            self._parts = [self._images(path) for path in self.files]
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        row = self._parts[part][index - self.starts[part]]
        image = torch.from_numpy(np.array(row).reshape(3, IMAGENET64_SIDE, IMAGENET64_SIDE))
        return (self.transform(image) if self.transform else image), int(self.targets[index])

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_parts": None}  # loader processes re-open the files rather than copy the arrays

    @staticmethod
    def _images(path: Path) -> np.ndarray:
        images = _npz_memmap(path, "data")
        if images is None:
            with np.load(path) as npz:
                images = npz["data"]
        return images


def _npz_memmap(path: Path, key: str) -> np.ndarray | None:
    """A read-only memory map of array `key` inside an npz file, or None where the member is compressed."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{key}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", f.read(30)[26:30])  # the zip local file header
        f.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(f)
        offset = f.tell()
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran_order else "C")


def _train_transform(recipe: str, dataset: str, size: int) -> v2.Compose:
    """The recipe's training transform for `dataset` at `size` pixels (see recipes.py)."""
    if recipe == "seed":
        return seed_transform(size)
    if dataset == "cifar10":
        return _small_image_transform(32, size, CIFAR10_NORM)
    if dataset == "imagenet64":
        return _small_image_transform(IMAGENET64_SIDE, size, IMAGENET_NORM)
    return _imagefolder_transform(size)


def _small_image_transform(native: int, size: int, norm: tuple) -> v2.Compose:
    """CIFAR-style augmentation: (resize), random crop with padding, horizontal flip, normalise."""
    resize = [v2.Resize(size, antialias=True)] if size != native else []
    return v2.Compose([v2.ToImage(), *resize, v2.RandomCrop(size, padding=size // 8), v2.RandomHorizontalFlip(),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(*norm)])


def _imagefolder_transform(size: int) -> v2.Compose:
    """ImageNet-style augmentation: random resized crop, horizontal flip, normalise."""
    return v2.Compose([v2.ToImage(), v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(*IMAGENET_NORM)])
