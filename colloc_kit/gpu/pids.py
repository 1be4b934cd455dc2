"""Process utilities the MPS modules share: read a pid file, check, wait for and kill processes by pid.

    >>> import os
    >>> alive(os.getpid()), wait_gone([os.getpid()], timeout_s=0.0) == [os.getpid()]
    (True, True)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable

import psutil

__all__ = ["alive", "kill", "read_pid", "username", "wait_gone"]


def read_pid(path: Path) -> int | None:
    """The pid written first in `path`, or None where the file is missing or holds none."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has exited)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def username(pid: int) -> str | None:
    """The user `pid` runs as, or None where it cannot be read."""
    try:
        return psutil.Process(pid).username()
    except psutil.Error:
        return None


def wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    """Wait until every pid has exited (zombies count as exited); the ones still alive at the deadline."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def kill(pids: list[int]) -> None:
    """SIGKILL each pid (gone ones are skipped) and wait up to 5 s for them to exit."""
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    wait_gone(pids, 5.0)
