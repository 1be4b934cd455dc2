"""Child processes, supervised once for the whole kit: the host's cores split into blocks (a job's share of them,
`host_shares`, and the threads it runs there, `thread_env`), a child's output pumped line by line, and stopping that
always ends (a signal to each child's process group, a grace period, then SIGKILL for the group and everything below
it). The launcher supervises its job workers with it, the GPU executor its cell processes.

    >>> split_cores([0, 1, 2, 3, 4, 5, 6, 7], 2)
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    >>> split_cores([0, 1, 2, 3, 4, 5, 6, 7], 3)    # no core left idle: the first blocks take one more
    [[0, 1, 2], [3, 4, 5], [6, 7]]
    >>> split_cores([0, 1], 3)                      # more children than cores: cores are shared round-robin
    [[0], [1], [0]]
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from typing import IO, Callable, Iterable, Iterator, Protocol

import psutil

__all__ = ["Child", "die_with_parent", "host_cores", "host_shares", "kill_tree", "pump_lines", "sigterm_as_interrupt",
           "signal_group", "oom_kills", "split_cores", "stop_all", "suspended", "thread_env", "unreaped_exit_codes"]

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
VMSTAT = "/proc/vmstat"  # its `oom_kill`: the processes the kernel's out-of-memory killer killed since boot


class Child(Protocol):
    """What supervision needs of a child: `subprocess.Popen` has it, and so has a worker the zygote forked."""

    pid: int

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; the exit code (subprocess.TimeoutExpired after `timeout` s)."""


def host_cores() -> list[int]:
    """The cores this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def split_cores(cores: list[int], n: int) -> list[list[int]]:
    """`n` disjoint contiguous blocks that together hold every one of `cores` (the first `len(cores) % n` blocks one
    core larger); where there are fewer cores than children, one core each, shared round-robin."""
    n = max(1, n)
    if len(cores) < n:
        return [[cores[i % len(cores)]] for i in range(n)]
    size, larger = divmod(len(cores), n)
    starts = [i * size + min(i, larger) for i in range(n + 1)]
    return [cores[starts[i]:starts[i + 1]] for i in range(n)]


def host_shares(n_concurrent: int, placement: str = "pinned") -> list[list[int] | None]:
    """Where each of `n_concurrent` jobs may run on the host (`spec.PLACEMENTS`). `pinned`: disjoint blocks that
    together hold every core of this process (the first blocks one core larger where the cores do not divide), so
    jobs neither oversubscribe the host nor wander across it and no core idles; `unpinned`: None each, no affinity
    (the jobs and their loader workers go where the OS schedules them, as the seed study ran).

    >>> host_shares(2, "unpinned")
    [None, None]
    >>> {core for block in host_shares(3) for core in block} == set(host_cores())
    True
    """
    if placement == "unpinned":
        return [None] * n_concurrent
    return list(split_cores(host_cores(), n_concurrent))


def thread_env(cores: list[int] | None) -> dict[str, str]:
    """Intra-op threads matching a job's block of cores; none set for an unpinned job (torch's own default)."""
    if cores is None:
        return {}
    threads = str(len(cores))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def pump_lines(stream: IO[bytes], on_line: Callable[[str], None], name: str) -> threading.Thread:
    """A daemon thread that hands each line of `stream` (decoded, undecodable bytes replaced) to `on_line` until the
    stream ends, then closes it; the stream is drained to its end, so a child never blocks on a full pipe."""
    def pump() -> None:
        for raw in stream:
            on_line(raw.decode("utf-8", "replace"))
        stream.close()

    thread = threading.Thread(target=pump, name=name, daemon=True)
    thread.start()
    return thread


def signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group `pid` leads (a child started in a session of its own); quiet if it is gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def suspended(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, SIGTSTP: state T): it makes no progress, and acts on no signal but
    SIGKILL until it is sent SIGCONT. False where it is gone.

    >>> suspended(os.getpid())
    False
    """
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def unreaped_exit_codes(parent: int) -> dict[int, int]:
    """{pid: exit code, negative for a signal} of `parent`'s children that ended but are not reaped yet (zombies; a
    parent that is suspended reaps none), read from /proc (stat's `exit_code`, Linux 3.5 and later).

    >>> unreaped_exit_codes(os.getpid())
    {}
    """
    codes: dict[int, int] = {}
    try:
        children = psutil.Process(parent).children()
    except psutil.Error:
        return codes
    for child in children:
        try:
            with open(f"/proc/{child.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # from the state on: the name may hold anything
            if fields[0] == "Z":
                codes[child.pid] = os.waitstatus_to_exitcode(int(fields[49]))  # stat's field 52
        except (OSError, IndexError, ValueError):  # reaped meanwhile; an older kernel
            continue
    return codes


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed on this machine since it booted (its memory
    cgroups' kills too; /proc/vmstat's `oom_kill`, Linux 4.13 and later), or None where that cannot be read.

    >>> oom_kills() is None or oom_kills() >= 0
    True
    """
    try:
        with open(VMSTAT) as vmstat:
            for line in vmstat:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def kill_tree(pid: int) -> None:
    """SIGKILL process `pid`, its group, and every process below it (children that started sessions of their own)."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        below = []
    signal_group(pid, signal.SIGKILL)
    for process in below:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_all(children: Iterable[Child], first: int = signal.SIGTERM, grace_s: float = 5.0,
             on_kill: Callable[[Child], None] | None = None) -> None:
    """Stop every live child: `first` to its group, then SIGCONT (a stopped process acts on `first` only once
    continued, and would otherwise spend the grace period stopped), up to `grace_s` seconds for all of them together,
    then `kill_tree` for each still there (`on_kill` hears of it first); every child is reaped before this returns."""
    children = list(children)
    for child in children:
        if child.poll() is None:
            signal_group(child.pid, first)
            signal_group(child.pid, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    try:
        for child in children:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for child in children:
            if child.poll() is None:
                if on_kill is not None:
                    on_kill(child)
                kill_tree(child.pid)
            else:
                signal_group(child.pid, signal.SIGKILL)  # a child that ended may leave loader processes in its group
            child.wait()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While runs are under way, SIGTERM (a timeout, a service stop, a dispatcher passing an interrupt on) takes the
    clean path of Ctrl-C: a KeyboardInterrupt. Only the main thread can install a handler; elsewhere, as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """In a child process (e.g. a pool's initializer): be sent `sig` when the parent `parent` dies, whatever ends it,
    SIGKILL included (Linux prctl PR_SET_PDEATHSIG; strictly, when the parent's thread that started this process
    ends); if it died already, end now. Not inherited by this process's own children. Elsewhere (no prctl), nothing."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent:  # it died between the fork and the prctl: no signal would come
        os.kill(os.getpid(), sig)
