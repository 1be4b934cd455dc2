"""Checks that the kit leaves no process behind (real processes)."""

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


def kit_processes_below_us() -> list[psutil.Process]:
    """This test process's descendants that run the kit (lanes, zygotes, workers): what a run must not leave behind.
    Other tests' helpers (a browser's driver on its way out) are not the kit's."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "colloc_kit" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:  # ended, or a zombie, while we looked
            continue
    return found


def kit_processes_since(started: float) -> list[psutil.Process]:
    """Every process on this machine that runs the kit and began after `started` (a time.time())."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.create_time() >= started and "colloc_kit" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:  # ended while we looked
            continue
    return found
