"""Checks that a killed kit leaves no process behind (real processes)."""

from __future__ import annotations

import subprocess

import psutil


def survivors_of_killed_kit(kit: subprocess.Popen, below: list[psutil.Process], timeout: float) -> list:
    """SIGKILL `kit`, wait up to `timeout` s for the processes `below` it to end, and return those still running
    (killed now: ours, not left to the next test)."""
    kit.kill()
    kit.wait()
    _, alive = psutil.wait_procs(below, timeout=timeout)
    for proc in alive:
        proc.kill()
    return alive
