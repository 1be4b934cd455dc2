"""Every folder a command takes, made absolute and checked in one place before anything starts: `run --out` (and
`demo`, `seed-NN`, `advise --confirm`), `--data-root`, `data make --root`, `batch --out` and `--notebooks`, `status`,
`show`, `reference export`; a relative path is taken against the working folder of that moment, and never again. A
folder that is not text, too long, absent, a file, or not writable (or readable) is refused with what is wrong and
what to do (BadInput: exit 2), never found out half-way through a run.

    >>> import tempfile
    >>> check_folder(tempfile.mkdtemp() + "/new/runs", "results folder (--out)", write=True).name
    'runs'
    >>> check_folder("/nonexistent/runs", "run folder", exists=True)
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: run folder /nonexistent/runs does not exist; give an existing folder
    >>> check_folder("", "results folder (--out)", write=True)
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: results folder (--out) is empty; give a folder (e.g. runs)
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from colloc_kit.errors import BadInput

__all__ = ["PATH_MAX", "absolute", "check_folder", "shown"]

PATH_MAX = 4096  # bytes in a path (Linux); a folder name's limit is the file system's (NAME_MAX, usually 255)
_SHOWN_CHARS = 120


def shown(path: Any) -> str:
    """A path as a message quotes it: undecodable bytes escaped, a long one cut in the middle.

    >>> shown("/tmp/caf\\udce9")
    '/tmp/caf\\\\xe9'
    >>> len(shown("/x" * 1000)) < 150
    True
    """
    text = os.fsencode(os.fspath(path)).decode("utf-8", "backslashreplace")
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:60]}...({len(text):,} characters)...{text[-40:]}"


def absolute(path: str | os.PathLike) -> Path:
    """`path` made absolute against the working folder of the moment it enters the kit (`~` expanded), so that
    nothing downstream depends on where the process stands later (papermill's kernels, a worker's run folder).

    >>> import os
    >>> absolute("runs") == Path(os.getcwd(), "runs")
    True
    >>> absolute("/tmp/../tmp/runs")
    PosixPath('/tmp/runs')
    """
    try:
        return Path(os.path.abspath(Path(path).expanduser()))
    except FileNotFoundError:  # os.getcwd(): the folder this process stands in was removed
        raise BadInput(f"{shown(path)} is relative, and the current folder no longer exists; cd to a folder that "
                       "does, or give an absolute path") from None


def check_folder(path: Any, what: str, *, write: bool = False, exists: bool = False) -> Path:
    """`path` as an absolute Path (`absolute`), once it is fit to be the folder `what` names (e.g. "results folder
    (--out)"); BadInput otherwise. `write`: files will be made in it (it, or the nearest folder above it where it is
    absent, must be writable); `exists`: it is read, so it must exist and be readable. Checked: text (UTF-8, no NUL),
    length (the path and each name), existence, type (a folder, and no file where a folder above it should be),
    permission.

    >>> check_folder("/proc/version/x", "--out", write=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    colloc_kit.errors.BadInput: --out /proc/version/x: /proc/version is a file, not a folder; give a folder (...)
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise BadInput(f"{what} is empty; give a folder (e.g. runs)" if path in ("", None) else
                       f"{what} must be a folder path, got {type(path).__name__}")
    text = os.fsdecode(os.fspath(path))
    label = f"{what} {shown(text)}"
    _check_text(text, label)
    folder = absolute(text)
    existing = _nearest_existing(folder, label)
    _check_length(folder, existing, label)
    if not existing.is_dir():
        where = "" if existing == folder else f": {shown(existing)}"
        raise BadInput(f"{label}{where} is a file, not a folder; give a folder"
                       + (" (it is created if absent)" if write else ""))
    if exists and existing != folder:
        raise BadInput(f"{label} does not exist; give an existing folder")
    if write and not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"{label}: cannot write in {shown(existing)} (no permission or a read-only file system); give "
                       "a folder you can write to")
    if exists and not os.access(folder, os.R_OK | os.X_OK):
        raise BadInput(f"{label}: cannot read it (no permission); fix its permissions or give another folder")
    return folder


def _check_text(text: str, label: str) -> None:
    if "\0" in text:
        raise BadInput(f"{label} holds a NUL character; give a plain folder path")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{label} is not UTF-8 text (bytes shown as \\x..); rename the folder or give another "
                       "whose name is text") from None


def _nearest_existing(folder: Path, label: str) -> Path:
    """`folder`, or the nearest folder above it that exists; BadInput where one of them cannot even be looked at."""
    for candidate in (folder, *folder.parents[:-1]):  # absolute: its last parent, the root, exists
        try:
            os.stat(candidate)
            return candidate
        except FileNotFoundError:
            continue
        except PermissionError:
            raise BadInput(f"{label}: cannot look into {shown(candidate.parent)} (no permission); fix its "
                           "permissions or give another folder") from None
        except OSError as exc:  # a file where a folder above should be (the next one up says which), too long
            if exc.errno not in (errno.ENOTDIR, errno.ENAMETOOLONG):
                raise BadInput(f"{label}: {exc.strerror}; give another folder") from None
    return Path(folder.anchor)


def _check_length(folder: Path, existing: Path, label: str) -> None:
    """The whole path and each name in it within what the system takes."""
    size = len(os.fsencode(folder))
    if size >= PATH_MAX:
        raise BadInput(f"{label} is {size:,} bytes long; a path has at most {PATH_MAX - 1:,}: give a shorter one")
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for name in folder.parts:
        if len(os.fsencode(name)) > name_max:
            raise BadInput(f"{label}: the name {shown(name)} is {len(os.fsencode(name)):,} bytes long; this file "
                           f"system takes at most {name_max}: give a shorter name")
