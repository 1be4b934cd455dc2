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


def stop_tree(proc: subprocess.Popen, grace_s: float = 15) -> list[psutil.Process]:
    """Stop a server started by a test and every process under it: SIGTERM, then SIGKILL to whatever is still running
    after `grace_s`; returns those that outlived even that."""
    children = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        child.kill()
    return psutil.wait_procs(alive, timeout=10)[1]
