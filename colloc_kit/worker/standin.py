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

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import psutil

from colloc_kit import atomic, paths, supervise
from colloc_kit.errors import BadInput, CollocKitError

__all__ = ["CIFAR10_CLASSES", "IMAGENET_JPEG_QUALITY", "IMAGENET_SIZES", "IMAGENET_TRAIN_IMAGES", "LABEL", "LAYOUTS",
           "Layout", "MARKER", "is_standin", "make", "missing_data"]

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
    files already there are kept, so an interrupted make resumes. Returns the folder to pass as data_root.

    `jobs`: processes writing at once, 1 to the cores this process may use (default: those cores, at most 32).
    Every path is checked before anything is written (BadInput naming what is wrong); the writing processes end with
    this one on every exit path: an error, Ctrl-C, SIGTERM, and SIGKILL too (they are sent SIGKILL as it dies)."""
    if name not in LAYOUTS:
        raise BadInput(f"no stand-in for {name!r:.60}; choose one of {', '.join(LAYOUTS)}")
    layout = LAYOUTS[name]
    count = layout.images if images is None else images
    if not isinstance(count, int) or isinstance(count, bool) or count < len(layout.classes):
        raise BadInput(f"--images must be a whole number of at least {len(layout.classes)} (one per class of "
                       f"{name}), got {count!r:.40}")
    workers = min(_workers(jobs), len(layout.classes))
    folder = paths.check_folder(root, "data root (--root)", write=True) / name
    _check_layout(folder, layout)
    try:
        (folder / "train").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create {folder / 'train'}: {exc.strerror or exc}; choose a writable --root") from None
    chunks = [(layout.name, str(folder / "train" / cls), c, _share(count, len(layout.classes), c))
              for c, cls in enumerate(layout.classes)]
    try:
        _remove_temps(folder)  # an earlier make killed mid-image (SIGKILL: no clean-up ran)
        _write_all(chunks, workers, count, f"stand-in {name}", progress)
    finally:
        _remove_temps(folder)  # the writers this make killed on Ctrl-C or an error
    held = sum(1 for _ in (folder / "train").glob(f"*/*{layout.suffix}"))  # more where an earlier make wrote more
    atomic.write_text(folder / MARKER, f"{LABEL}: {layout.description}; {held} training images, made by "
                                       f"`colloc-kit data make {name}`. Not the real {name}: random pixels.\n")
    return folder


def _remove_temps(folder: Path) -> None:
    """The temp files (`atomic.replacing`'s, `.<image>.<pid>.tmp`) that a writer killed mid-image left in the class
    folders; those of a writer still alive (another make into the same root, at the same time) are its own."""
    for tmp in (folder / "train").glob("*/.*.tmp"):
        writer = tmp.name.rsplit(".", 2)[-2]
        if not (writer.isdigit() and _alive(int(writer))):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _workers(jobs: int | None) -> int:
    """How many processes write: `jobs` once it is 1 to the cores (BadInput otherwise), else the cores (<= 32)."""
    cores = len(supervise.host_cores())
    if jobs is None:
        return min(cores, 32)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= cores:
        raise BadInput(f"--jobs must be a whole number from 1 to {cores} (the cores this process may use), got "
                       f"{jobs!r:.40}; e.g. --jobs {cores}")
    return jobs


def _check_layout(folder: Path, layout: Layout) -> None:
    """Refuse (BadInput) what stands in the way of the dataset's folders: a file where a folder goes (or a folder
    where the marker file goes), a folder that cannot be written in."""
    wanted = [(folder, f"the {layout.name} folder"), (folder / "train", "its train/ folder"),
              *((folder / "train" / c, f"the folder of class {c}") for c in layout.classes)]
    for path, what in wanted:
        if os.path.lexists(path) and not path.is_dir():
            raise BadInput(f"{paths.shown(path)} is a file where {what} should be; move it away, or choose another "
                           "--root")
        if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
            raise BadInput(f"cannot write in {paths.shown(path)} ({what}: no permission or a read-only file system); "
                           "fix its permissions, or choose another --root")
    if (folder / MARKER).is_dir():
        raise BadInput(f"{paths.shown(folder / MARKER)} is a folder where the stand-in's marker file should be; move "
                       "it away, or choose another --root")


def _write_all(chunks: list[tuple[str, str, int, int]], workers: int, count: int, label: str, progress: bool) -> None:
    """Write every class folder in `workers` processes, with a progress bar; the processes end with this call on
    every path (SIGTERM taken as Ctrl-C; each one SIGKILLed should this process die)."""
    from tqdm.auto import tqdm  # noqa: PLC0415 - only when writing: the worker imports this module

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_writer_setup, initargs=(os.getpid(),))
    try:
        with supervise.sigterm_as_interrupt(), tqdm(total=count, unit="img", disable=not progress, desc=label) as bar:
            for written in pool.map(_write_class, chunks, chunksize=max(1, len(chunks) // (4 * workers))):
                bar.update(written)
    except BrokenProcessPool:
        _kill_writers(pool)
        raise CollocKitError("a process writing the images died (killed from outside, or out of memory); run the "
                             "command again: the images written are kept") from None
    except BaseException:  # an error, Ctrl-C, SIGTERM: the other writers stop now, not after their class folder
        _kill_writers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kill_writers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL the pool's processes (Python 3.14 has `pool.kill_workers()`; before it, its process table)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.kill()


def _writer_setup(parent: int) -> None:
    """In each writing process: die with the command, and leave Ctrl-C to it (it stops the writers)."""
    supervise.die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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


def missing_data(experiment: str, data_root: str | Path, folders: list[str]) -> None:
    """BadInput, before anything starts, where a dataset folder an experiment reads (`folders`, under `data_root`) is
    missing: which, and the `colloc-kit data make` commands that write stand-ins there, or where the real data go.

    >>> missing_data("seed-33", "/nowhere", ["/nowhere/cifar10", "/nowhere/imagenet"])     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: seed-33 reads image folders under the data root /nowhere, which does not exist. ...
    """
    wanted = list(dict.fromkeys(Path(f) for f in folders))
    missing = [f for f in wanted if not f.is_dir()]
    if not missing:
        return
    which = "does not exist" if not Path(data_root).is_dir() else f"has no {', '.join(f'{f.name}/' for f in missing)}"
    make = "; ".join(f"colloc-kit data make {f.name} --root {f.parent}" for f in missing)
    raise BadInput(f"{experiment} reads image folders under the data root {data_root}, which {which}. Write stand-ins "
                   f"there (random pixels in the real layout): {make} (--images N for fewer); or give --data-root the "
                   f"folder that holds the real datasets as {', '.join(f.name for f in wanted)}, each a folder of "
                   "class folders of images")

