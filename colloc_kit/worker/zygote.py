"""A preloaded process that forks job workers, so that torch, the jobs' libraries and the worker's code are imported
once per experiment instead of once per job (on the H100 these imports were about 10 s of each run's overhead; issue
10).

The zygote imports and never initialises CUDA (it checks, and stays unused if an import did, or started a thread).
Each worker it forks leads its own process group, takes the kit's pipes as stdin/stdout and its log as stderr, sets the
job's environment (the slot's CUDA_VISIBLE_DEVICES, MPS pipe directory, thread counts), cores and working directory
before anything touches CUDA, names itself as `python -m colloc_kit.worker ...` would (ps, pgrep) and runs the
worker's `main`. To the launcher a forked worker is a `Popen` look-alike: pid (its process group), stdin, stdout,
poll/wait with the exit code (negative: killed by that signal).

Faults: the zygote dies with the kit that started it, whatever ends the kit (SIGKILL too) and also while it still
imports (a parent-death signal, `supervise.die_with_parent`; Linux counts the kit's thread that started it as its
parent, and a lane starts and ends its zygote in one thread); it also leaves when the kit closes its socket. A worker
whose kit is gone leaves when its stdin closes, as a `Popen`-started one does. A worker outliving its zygote (the
zygote killed) is still seen to end (a pidfd), with exit code `EXIT_UNKNOWN`. A zygote found suspended (SIGSTOP) where
the kit waits on it (its hello, a fork, a worker that ended unreported) is killed: stopped, it would neither fork nor
reap, and the kit would wait forever; later workers start as fresh processes. `COLLOC_KIT_ZYGOTE=0` turns the zygote
off (every worker a fresh `python -m colloc_kit.worker`).

This module is the kit's side (`Zygote`, `ForkedWorker`); the process it starts is `zygote_process`.

    >>> with Zygote() as zygote:                                                  # doctest: +SKIP
    ...     proc = zygote.spawn(["python", "-m", "colloc_kit.worker", "--model", "smallcnn", "--device", "cpu",
    ...                          "--steps", "5"], env=dict(os.environ), cores=[0], cwd=".", stderr=sys.stderr)
    ...     proc.wait()
    0
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any, Iterable

from colloc_kit import supervise
from colloc_kit.spec import JobSpec
from colloc_kit.worker import zygote_process
from colloc_kit.worker.models import TIMM_PREFIX
from colloc_kit.worker.zygote_process import MESSAGE_BYTES, POLL_S, WORKER_MODULE

__all__ = ["CHECK_S", "EXIT_UNKNOWN", "ForkedWorker", "HELLO_TIMEOUT_S", "ONE_THREAD", "Zygote", "enabled", "libraries"]

ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1"}  # numpy's BLAS starts a thread pool at import otherwise (training never
                                          # calls it); the zygote must have one thread when it forks
EXIT_UNKNOWN = 255  # a worker whose zygote died before reporting how it ended
HELLO_TIMEOUT_S = 600.0  # the imports; past this the kit starts workers as fresh processes
CHECK_S = 0.5  # how often the kit, waiting on the zygote, looks whether it is suspended


def libraries(jobs: Iterable[JobSpec]) -> list[str]:
    """What a zygote imports for `jobs` beyond what every worker needs (`zygote_process.PRELOAD`): torchvision for
    its models and for data on disk (with the kit's disk loaders), timm for timm's models and the seed recipe; nothing
    more for the tiny CPU model on synthetic data (torchvision is 0.4 s of CPU past torch's own imports). A worker
    imports anything missed here itself, after its fork.

    >>> libraries([JobSpec(model="smallcnn", device="cpu")])
    []
    >>> libraries([JobSpec(model="smallcnn", device="cpu"), JobSpec(model="resnet18", dataset="cifar10")])
    ['torchvision', 'colloc_kit.worker.disk_data']
    """
    jobs = list(jobs)
    needs = {
        "torchvision": any(job.model != "smallcnn" or job.dataset != "synthetic" for job in jobs),
        "colloc_kit.worker.disk_data": any(job.dataset != "synthetic" for job in jobs),
        "timm": any(job.model.startswith(TIMM_PREFIX) or job.recipe == "seed" for job in jobs),
    }
    return [name for name, needed in needs.items() if needed]


def enabled() -> bool:
    """Whether the kit forks workers from a zygote (`COLLOC_KIT_ZYGOTE=0` says no) and this system can (pidfds)."""
    return os.environ.get("COLLOC_KIT_ZYGOTE", "1") != "0" and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


class Zygote:
    """The kit's side: starts the zygote process, asks it for workers, hears how they end (exit code, CPU time). A
    context manager; leaving it closes the socket, which ends the zygote (its workers run on until they end or their
    stdin closes)."""

    def __init__(self, jobs: Iterable[JobSpec] = ()):
        """`jobs`: the jobs it will fork workers for, so that what only some need is imported too (`libraries`)."""
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        extra = libraries(jobs)
        self._proc = subprocess.Popen([sys.executable, "-m", zygote_process.__name__, str(theirs.fileno()),
                                       str(os.getpid()), *extra], pass_fds=[theirs.fileno()],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      env={**os.environ, **ONE_THREAD, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        theirs.close()
        self._started: queue.Queue = queue.Queue()  # (pid, pidfd) per spawn, or None when the zygote is gone
        self._exit_codes: dict[int, int] = {}
        self.children_cpu_s = 0.0  # user + system CPU seconds of the workers that ended (their loader processes too)
        self._lost = threading.Event()
        self._killed_why: str | None = None  # why the kit killed it (suspended)
        self._hello: dict | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self._listen, name="zygote", daemon=True).start()

    def __enter__(self) -> "Zygote":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def for_experiment(cls, jobs: Iterable[JobSpec]) -> "contextlib.AbstractContextManager[Zygote | None]":
        """A zygote for an experiment's runs, or None where it is turned off or the system lacks pidfds."""
        return cls(jobs) if enabled() else contextlib.nullcontext()

    def close(self) -> None:
        """End the zygote: close its socket and reap it."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the listener; the zygote reads EOF
        except OSError:
            pass
        if self._hello is None or supervise.suspended(self._proc.pid):  # nothing to wait for: it forked none, or
            self._proc.kill()                                            # it is stopped
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._sock.close()

    def usable(self) -> bool:
        """Wait for the zygote's imports; False (saying why on stderr, once) if it refused to fork or is gone."""
        with self._lock:
            if self._hello is None:
                try:
                    item = self._next(HELLO_TIMEOUT_S)
                except queue.Empty:
                    item = {"ok": False, "why": f"its imports took over {HELLO_TIMEOUT_S:.0f} s"}
                self._hello = item if isinstance(item, dict) else {"ok": False, "why": self._killed_why or "it exited"}
                if not self._hello["ok"]:
                    print(f"colloc-kit: workers start as fresh processes, not from the zygote: {self._hello['why']}",
                          file=sys.stderr)
        return bool(self._hello["ok"]) and not self._lost.is_set() and self._killed_why is None

    def spawn(self, argv: list[str], env: dict[str, str], cores: list[int] | None, cwd: str,
              stderr: IO) -> "ForkedWorker | None":
        """Fork a worker running `argv` (`python -m colloc_kit.worker ...`) on `cores` (None: wherever the zygote
        may run); None if the zygote cannot (then start it as a fresh process)."""
        if argv[1:3] != ["-m", WORKER_MODULE] or not self.usable():
            return None
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        request = {"args": argv[3:], "title": " ".join(argv), "env": env, "cores": cores, "cwd": cwd}
        started = None
        try:
            with self._lock:
                socket.send_fds(self._sock, [json.dumps(request).encode()], [stdin_r, stdout_w, stderr.fileno()])
                started = self._next(float("inf"))
        except OSError:
            pass
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
            if started is None:  # also on an interrupt: a worker forked anyway sees EOF on stdin and leaves
                os.close(stdin_w)
                os.close(stdout_r)
        if started is None:
            return None
        pid, pidfd = started
        return ForkedWorker(self, argv, pid, pidfd, os.fdopen(stdin_w, "wb"), os.fdopen(stdout_r, "rb"))

    @property
    def pid(self) -> int:
        """The zygote process's id."""
        return self._proc.pid

    @property
    def lost(self) -> str | None:
        """Why the zygote is gone while the kit still holds it (killed, crashed), or None while it serves."""
        if self._killed_why:  # (its listener may not have heard it end yet)
            return self._killed_why
        if not self._lost.is_set():
            return None
        code = self._proc.poll()
        return f"the zygote (pid {self._proc.pid}) ended" + (f" with code {code}" if code is not None else "")

    def exit_code(self, pid: int, pidfd: int) -> int | None:
        """How worker `pid` ended, None while it runs: as the zygote reaped it, or EXIT_UNKNOWN if it ended after the
        zygote was gone."""
        if pid in self._exit_codes:
            return self._exit_codes[pid]
        if select.select([pidfd], [], [], 0)[0]:  # readable: the process ended
            if self._lost.is_set():
                return self._exit_codes.get(pid, EXIT_UNKNOWN)
            self._kill_if_suspended()  # stopped, it would never reap it nor say how it ended
        return None

    def _next(self, timeout: float) -> Any:
        """The listener's next item (the hello, a fork's (pid, pidfd), None once the zygote is gone) within `timeout`
        s (queue.Empty past it); a zygote found suspended meanwhile is killed (then None)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._started.get(timeout=max(0.0, min(CHECK_S, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise
                self._kill_if_suspended()

    def _kill_if_suspended(self) -> None:
        """Kill the zygote if it is suspended (SIGSTOP), saying why (`lost`), once the exit codes of the workers it
        has not reaped are read; its socket closes, so the listener marks it gone."""
        if self._killed_why is None and supervise.suspended(self._proc.pid):
            for pid, code in supervise.unreaped_exit_codes(self._proc.pid).items():  # lost with it otherwise
                self._exit_codes.setdefault(pid, code)
            self._killed_why = (f"the zygote (pid {self._proc.pid}) was suspended (SIGSTOP, state T): it could neither "
                                "fork workers nor say how they ended, so the kit killed it")
            self._proc.kill()

    def _listen(self) -> None:
        """Hear the zygote: its hello, each fork's pid and pidfd, each worker's exit code; then mark it gone."""
        try:
            while True:
                message, fds, _, _ = socket.recv_fds(self._sock, MESSAGE_BYTES, 1)
                if not message:
                    break
                said = json.loads(message)
                if "exited" in said:
                    self.children_cpu_s += said["cpu_s"]  # before the exit code: who sees the one sees the other
                    self._exit_codes[said["exited"]] = said["code"]
                elif "started" in said:
                    self._started.put((said["started"], fds[0]))
                else:
                    self._started.put(said)  # the hello
        except OSError:
            pass
        self._lost.set()
        self._started.put(None)


class ForkedWorker:
    """A worker forked by the zygote, with the part of `subprocess.Popen` the launcher uses."""

    def __init__(self, zygote: Zygote, args: list[str], pid: int, pidfd: int, stdin: IO[bytes], stdout: IO[bytes]):
        self.args, self.pid, self.stdin, self.stdout = args, pid, stdin, stdout
        self.returncode: int | None = None
        self._zygote, self._pidfd = zygote, pidfd

    def poll(self) -> int | None:
        """The worker's exit code, or None while it runs (as `subprocess.Popen.poll`)."""
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid, self._pidfd)
            if self.returncode is not None:
                os.close(self._pidfd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the worker to end and return its exit code; subprocess.TimeoutExpired after `timeout` s."""
        start = time.monotonic()
        while (code := self.poll()) is None:
            if timeout is not None and time.monotonic() - start > timeout:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(POLL_S)
        return code
