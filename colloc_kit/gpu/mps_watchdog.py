"""What keeps an MPS daemon from outliving the kit: a watchdog process that quits it when the process that started
it dies (a kernel restarted or killed mid-run), and the subreaper setting that lets this process reap the daemon,
which detaches itself. `python -m colloc_kit.gpu.mps_watchdog` is the watchdog.

    >>> watch(12345, "nvidia-cuda-mps-control", Path("/tmp/colloc-mps-x"))    # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

import psutil

from colloc_kit.gpu.mps_detect import PID_FILE, PROCESS_PREFIX, detect_running_daemons
from colloc_kit.gpu.pids import alive, kill, read_pid, wait_gone

__all__ = ["reap_exited_daemon_processes", "set_subreaper", "start_watchdog", "watch"]


def start_watchdog(control: str, env: dict[str, str], pipe_dir: Path, quit_timeout_s: float) -> subprocess.Popen:
    """A process in its own session that quits the daemon if this process dies first (a kernel restarted or killed
    mid-run, or while it shuts the daemon down), so no daemon outlives the kit. `stop()` ends it once the daemon is
    gone."""
    command = [sys.executable, "-m", "colloc_kit.gpu.mps_watchdog", "--watch", str(os.getpid()), "--control", control,
               "--pipe-dir", str(pipe_dir), "--quit-timeout-s", str(quit_timeout_s)]
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def watch(owner_pid: int, control: str, pipe_dir: Path, poll_s: float = 0.5, quit_timeout_s: float = 15.0) -> None:
    """Wait for `owner_pid` to die; then quit the daemon at `pipe_dir` (kill it if it does not go) and remove the pipes.

    >>> watch(12345, "nvidia-cuda-mps-control", Path("/tmp/colloc-mps-x"))    # doctest: +SKIP
    """
    control_pid = read_pid(pipe_dir / PID_FILE)
    while alive(owner_pid):
        if control_pid is None or not alive(control_pid):
            return
        time.sleep(poll_s)
    try:
        subprocess.run([control], input="quit\n", text=True, capture_output=True, timeout=quit_timeout_s)
    except subprocess.TimeoutExpired:
        pass
    left = wait_gone([control_pid], quit_timeout_s) if control_pid else []
    kill(left + [d.pid for d in detect_running_daemons(default_pipe_dir=None) if d.pipe_dir == str(pipe_dir)])
    shutil.rmtree(pipe_dir, ignore_errors=True)


def set_subreaper(on: bool) -> bool | None:
    """Make this process the reaper of its orphaned descendants (Linux), so that the daemon, which detaches itself,
    is reaped here when it exits instead of lingering as a zombie where init does not reap (containers).
    Returns the previous setting (None where prctl is unavailable)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        previous = ctypes.c_int(0)
        if libc.prctl(37, ctypes.byref(previous), 0, 0, 0) != 0:  # PR_GET_CHILD_SUBREAPER
            return None
        libc.prctl(36, int(on), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        return bool(previous.value)
    except (OSError, AttributeError):
        return None


def reap_exited_daemon_processes(pids: Iterable[int | None], timeout_s: float = 2.0) -> None:
    """Collect the exit status of MPS processes that became children of this process (see set_subreaper): the
    daemon, its servers, and any intermediate process of the daemon's own detaching, whose pids the kit never saw.
    Waits (at most `timeout_s`) for `pids`, this daemon's processes, to exit; the live processes of another daemon
    (MIG with MPS runs one per instance) are left alone. Only processes named nvidia-cuda-mps* are touched, so the
    launcher's own children keep their exit status."""
    deadline, known = time.monotonic() + timeout_s, [pid for pid in pids if pid]
    while True:
        waiting = [pid for pid in known if alive(pid)]
        for child in psutil.Process().children():
            try:
                if _is_mps_process(child) and child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, 0)
            except (psutil.Error, ChildProcessError):
                pass
        if not waiting or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _is_mps_process(process: psutil.Process) -> bool:
    try:
        return process.name().startswith(PROCESS_PREFIX)
    except psutil.Error:
        return False


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m colloc_kit.gpu.mps_watchdog",
                                     description="the MPS daemon's watchdog")
    parser.add_argument("--watch", type=int, required=True, help="pid whose death makes the daemon quit")
    parser.add_argument("--control", required=True)
    parser.add_argument("--pipe-dir", type=Path, required=True)
    parser.add_argument("--quit-timeout-s", type=float, default=15.0, help="how long `quit` may take before a kill")
    args = parser.parse_args()
    watch(args.watch, args.control, args.pipe_dir, quit_timeout_s=args.quit_timeout_s)
