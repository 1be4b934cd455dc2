"""A failed job's reason in words: what went wrong and what to do, for the failures a user can act on (an unreadable
image, a file gone or forbidden, a full disk, host memory, a data-loader worker killed); any other error as its type
and message. The raw error follows in brackets, so nothing is lost.

    >>> reason(PermissionError(13, "Permission denied", "/data/cifar10/train/cat/cat_1.png"))
    ... # doctest: +ELLIPSIS
    'cannot read /data/cifar10/train/cat/cat_1.png (permission denied): fix its permissions, or choose another ...'
    >>> reason(ValueError("odd"))
    'ValueError: odd'
"""

from __future__ import annotations

import errno
import re

__all__ = ["HOST_MEMORY_ADVICE", "out_of_host_memory", "reason"]

RAW_CHARS = 300  # the raw error kept after the words
HOST_MEMORY_ADVICE = "lower --batch-size or --workers, or run fewer copies at once"
CPU_ALLOCATOR = re.compile(r"DefaultCPUAllocator: (can't allocate|not enough) memory")  # torch's, host memory used up


def out_of_host_memory(exc: BaseException) -> bool:
    """Whether `exc` says host memory ran out: a MemoryError, or torch's CPU allocator failing (a RuntimeError).

    >>> out_of_host_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"))
    True
    """
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and bool(CPU_ALLOCATOR.search(str(exc))))


def _words(exc: BaseException) -> str | None:
    """What to say of `exc`, where the kit knows it; None otherwise."""
    name, text = type(exc).__name__, str(exc)
    if name == "UnidentifiedImageError":  # PIL's: a file of the dataset that is not an image it can read
        return "an image of the dataset cannot be read (damaged, or not an image): remove or replace it"
    if out_of_host_memory(exc):
        return f"out of host memory: {HOST_MEMORY_ADVICE}"
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"the disk is full{f' ({exc.filename})' if exc.filename else ''}: free space, or write elsewhere"
    if isinstance(exc, PermissionError) and exc.filename:
        return (f"cannot read {exc.filename} (permission denied): fix its permissions, or choose another "
                "--data-root")
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename} is gone (moved or deleted while the job ran): put it back, or check --data-root"
    if isinstance(exc, RuntimeError) and "DataLoader worker" in text:
        return ("a data-loader worker died (killed, or out of host memory): lower --workers, or run fewer copies "
                "at once")
    return None


def reason(exc: BaseException) -> str:
    """`exc` as a failed job's reason: the words for it (the raw error after them), else its type and message."""
    raw = f"{type(exc).__name__}: {exc}"
    words = _words(exc)
    if words is None:
        return raw
    return words if isinstance(exc, (PermissionError, FileNotFoundError)) else f"{words} ({raw[:RAW_CHARS]})"
