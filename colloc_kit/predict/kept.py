"""A result of the shipped sets kept on disk between processes: the reference cells (`check.reference_cells`, 2-4 s
of summarizing) are asked for by every kernel of 08 (its findings' held-out errors) and 09, and by each process that
reports findings or advises; the first computes them, the next read them back. The file is a pickle in
$COLLOC_KIT_CACHE (else $XDG_CACHE_HOME/colloc-kit, else ~/.cache/colloc-kit), named by a key of its inputs' bytes,
the kit's own source and the versions of Python, numpy and pandas: a changed file, line or version is a new key,
so what is read back is what would be computed. A folder that cannot be written or a file that cannot be read
back means computing, as before.

    >>> import os, pathlib, tempfile
    >>> os.environ["COLLOC_KIT_CACHE"] = tempfile.mkdtemp()
    >>> data = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (data / "runs.csv").write_text("1,2")
    >>> kept("sum", [data], lambda: sum(map(int, (data / "runs.csv").read_text().split(","))))
    3
    >>> kept("sum", [data], lambda: "computed again")                     # the same bytes: read back
    3
    >>> _ = (data / "runs.csv").write_text("1,3")
    >>> kept("sum", [data], lambda: "computed again")                     # other bytes: another key
    'computed again'
    >>> del os.environ["COLLOC_KIT_CACHE"]
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import Callable, Iterable, TypeVar

import numpy as np
import pandas as pd

from colloc_kit.atomic import replacing

__all__ = ["folder", "key", "kept"]

T = TypeVar("T")
KIT = Path(__file__).resolve().parents[1]  # colloc_kit/: its every .py is part of the key


def folder() -> Path:
    """Where kept results live: $COLLOC_KIT_CACHE, else $XDG_CACHE_HOME/colloc-kit, else ~/.cache/colloc-kit."""
    if os.environ.get("COLLOC_KIT_CACHE"):
        return Path(os.environ["COLLOC_KIT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "colloc-kit"


def key(inputs: Iterable[Path]) -> str:
    """The hash of every file under `inputs` (name and bytes), of the kit's source and of the versions it runs on."""
    digest = hashlib.sha256(f"{sys.version} numpy {np.__version__} pandas {pd.__version__}".encode())
    files = [(root, p) for root in inputs for p in sorted(Path(root).rglob("*")) if p.is_file()]
    for root, path in files + [(KIT, p) for p in sorted(KIT.rglob("*.py"))]:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def kept(name: str, inputs: Iterable[Path], compute: Callable[[], T]) -> T:
    """`compute()`, read back from `name`'s file under `folder()` where its key matches, else computed and kept
    there (an earlier key's file replaced)."""
    path = folder() / f"{name}-{key(inputs)}.pickle"
    try:
        return pickle.loads(path.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        pass  # none kept yet, or from a kit that no longer reads it: computed below
    value = compute()
    try:
        with replacing(path) as tmp:
            tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        for old in path.parent.glob(f"{name}-*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # a folder this user cannot write: computed each time, as before
    return value
