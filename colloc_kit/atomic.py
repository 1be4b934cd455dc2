"""The one way the kit writes a file that someone may read meanwhile: a temp file beside it, then a rename.

A reader (another process, a Slurm task on another node, `colloc-kit status`) never sees half a file; a failed write
leaves the previous file as it was and no temp file, and its error names the file (a failed flush alone does not).
On a full disk a small file that already exists is rewritten in the disk blocks it holds, where the new text fits, so
that a run can still record how it ended (manifests, status files).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "specs" / "a.json"
    >>> write_json(path, {"name": "demo"}).name
    'a.json'
    >>> json.loads(path.read_text())
    {'name': 'demo'}
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from pathlib import Path
from typing import Any, Iterator

__all__ = ["replacing", "write_json", "write_new_json", "write_text"]


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside `path` to write; on leaving, it replaces `path` (or is removed, on any error).

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "image.png"
    >>> with replacing(target) as tmp:
    ...     _ = tmp.write_bytes(b"pixels")
    >>> target.read_bytes(), sorted(p.name for p in target.parent.iterdir())
    (b'pixels', ['image.png'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not exc.filename:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically (see the module); returns `path`."""
    path = Path(path)
    try:
        with replacing(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as exc:
        if exc.errno != errno.ENOSPC or not _overwrite_within(path, text.encode()):
            raise
    return path


def write_json(path: str | Path, data: Any, indent: int | None = 2) -> Path:
    """Write `data` as JSON to `path` atomically; on a full disk, compactly in the file's own space where it fits."""
    try:
        return write_text(path, json.dumps(data, indent=indent, default=str))
    except OSError as exc:
        if exc.errno == errno.ENOSPC and indent is not None and _overwrite_within(
                Path(path), json.dumps(data, default=str).encode()):
            return Path(path)
        raise


def write_new_json(folder: str | Path, stem: str, data: Any) -> Path:
    """Write `data` as JSON to a file of its own in `folder`: `stem.json`, else `stem-1.json`, ... where taken (never
    replacing one), whole or not at all; returns it.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> [write_new_json(folder, "host-20261201-034959", {"n": n}).name for n in range(2)]
    ['host-20261201-034959.json', 'host-20261201-034959-1.json']
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{stem}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        for n in range(1000):
            path = folder / f"{stem}{f'-{n}' if n else ''}.json"
            try:
                os.link(tmp, path)  # fails where the name is taken: a file of its own, written whole
                return path
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free name for a new file", str(folder / f"{stem}.json"))
    finally:
        tmp.unlink(missing_ok=True)


def _overwrite_within(path: Path, data: bytes) -> bool:
    """Overwrite an existing file with data that fits in the disk blocks it already holds; False where it does not
    fit, or the file is absent or cannot be opened."""
    try:
        held = path.stat()
        if len(data) > max(held.st_size, held.st_blocks * 512):
            return False
        with open(path, "r+b") as file:
            file.write(data)
            file.truncate()
        return True
    except OSError:
        return False
