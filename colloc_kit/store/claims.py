"""One owner per cell while it runs: `out/<name>/claims/<cell id>.json`, made by the process about to run the cell
(its pid, start time and host; written whole, then hard-linked into place, which fails where a claim is there, as
O_CREAT|O_EXCL does), removed when the cell ends. Two kits on one folder thus never run one cell at once: the later
one finds the claim and leaves the cell to its owner; and a device (a GPU of a host) is claimed alike for each cell
(`turn`), so the two never run cells beside each other on one card. A claim whose owner is gone (killed, the machine
rebooted; `rundir.process_alive`) is stale and taken over.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with claimed(folder, "naive-x1-r0-abc") as held:
    ...     held is None, holder(folder, "naive-x1-r0-abc") is not None
    (True, True)
    >>> holder(folder, "naive-x1-r0-abc") is None
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from colloc_kit.store.rundir import process_alive, this_runner

__all__ = ["CLAIMS", "claimed", "describe", "holder", "turn"]

CLAIMS = "claims"
WAIT_S = 0.5  # how often a kit waiting for a device held by another looks again


def _claim_file(folder: Path, cell_id: str) -> Path:
    return Path(folder) / CLAIMS / f"{cell_id}.json"


def _read(file: Path) -> dict[str, Any] | None:
    """The claim in `file`; None where there is none; one that cannot be read (claims appear whole, so only a
    hand-edited one) reads as held by nobody."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(claim: dict[str, Any]) -> bool:
    return process_alive(claim.get("pid"), claim.get("started_at"), claim.get("host"))


def holder(folder: Path, cell_id: str) -> dict[str, Any] | None:
    """The live claim on `cell_id` in the experiment folder `folder` ({pid, started_at, host, since}); None where
    no live process holds it."""
    claim = _read(_claim_file(folder, cell_id))
    return claim if claim is not None and _alive(claim) else None


def describe(claim: dict[str, Any]) -> str:
    """A claim as people read it: `pid 123 on host-a since 22:41:05`."""
    since = claim.get("since")
    when = time.strftime("%H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return f"pid {claim.get('pid')} on {claim.get('host')} since {when}"


def _take(file: Path) -> bool:
    """Create `file` as this process's claim, only where no file is there; True where it was made."""
    pid, started_at = this_runner()
    text = json.dumps({"pid": pid, "started_at": started_at, "host": socket.gethostname(), "since": time.time()})
    file.parent.mkdir(parents=True, exist_ok=True)
    draft = file.with_name(f".{file.name}.{pid}.draft")
    draft.write_text(text, encoding="utf-8")
    try:
        os.link(draft, file)  # like O_CREAT|O_EXCL, but the claim appears whole: no reader sees it empty
    except FileExistsError:
        return False
    finally:
        draft.unlink(missing_ok=True)
    return True


def _clear_stale(file: Path) -> None:
    """Remove the claim in `file` if its owner is gone. Moved aside first (one rename wins), then checked again:
    a live claim that another kit made meanwhile is put back (a hard link never replaces a file made since)."""
    aside = file.with_name(f".{file.name}.{os.getpid()}.stale")
    try:
        os.rename(file, aside)
    except FileNotFoundError:
        return
    claim = _read(aside)
    if claim and _alive(claim):
        with contextlib.suppress(OSError):
            os.link(aside, file)
    aside.unlink(missing_ok=True)


@contextlib.contextmanager
def turn(folder: Path, device: str, waiting: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Hold `device` (a GPU of a host: `gpu-<host>-<index>`) for the block, waiting while another live process of
    the folder holds it (`waiting(its claim)` is called once): two kits on one folder never run cells on one device
    at once, so neither measures the other's jobs beside its own."""
    told = False
    while True:
        with claimed(folder, device) as other:
            if other is None:
                yield
                return
        if not told:
            waiting(other)
            told = True
        time.sleep(WAIT_S)


@contextlib.contextmanager
def claimed(folder: Path, cell_id: str) -> Iterator[dict[str, Any] | None]:
    """Hold the claim on `cell_id` for the block: yields None where this process holds it (released on leaving, on
    any exit), else the live claim of the process that holds it (then nothing is held, and the block should leave
    the cell to it)."""
    file = _claim_file(folder, cell_id)
    if not _take(file):
        claim = _read(file)
        if claim is not None and _alive(claim):
            yield claim
            return
        _clear_stale(file)
        if not _take(file):
            yield _read(file) or {"pid": "?", "host": "?"}
            return
    try:
        yield None
    finally:
        file.unlink(missing_ok=True)
