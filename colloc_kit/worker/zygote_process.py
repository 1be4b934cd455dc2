"""The zygote process itself (`python -m colloc_kit.worker.zygote_process FD KIT [EXTRA...]`, started by
`zygote.Zygote`): it dies with the kit, imports what every worker needs once, says whether forking is safe (no CUDA
initialised, one thread), then forks a worker per request on its socket until the kit closes it. Each forked child
takes the job's process group, streams, name, environment, cores and directory, then runs the worker's `main`; the
zygote reports each worker's exit code and CPU time back to the kit.

    >>> PRELOAD[:2]
    ('torch', 'torch._dynamo')
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import json
import os
import select
import socket
import sys
from pathlib import Path
from typing import Iterable, NoReturn

from colloc_kit import supervise

__all__ = ["CUDA_ERROR_NOT_INITIALIZED", "MESSAGE_BYTES", "POLL_S", "PRELOAD", "WORKER_MODULE", "load_lazy_libraries",
           "main"]


# what every worker imports (torch._dynamo: by a job's first optimizer, about 2 s of CPU); `zygote.libraries` adds
# what only some jobs need
PRELOAD = ("torch", "torch._dynamo", "setproctitle", "scipy.special", "colloc_kit.worker.train",
           "colloc_kit.worker.loaders", "colloc_kit.worker.models", "colloc_kit.worker.recipes")
WORKER_MODULE = "colloc_kit.worker"
POLL_S = 0.02
MESSAGE_BYTES = 1 << 20
CUDA_ERROR_NOT_INITIALIZED = 3


def _preload(extra: Iterable[str] = ()) -> str | None:
    """Import what every worker needs (and `extra`); why forking would be unsafe now, or None."""
    for name in (*PRELOAD, *extra):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the worker meets the same error itself and reports it as an event
            pass
    load_lazy_libraries()
    if "setproctitle" not in sys.modules:
        return "setproctitle is not installed (pip install setproctitle), so a forked worker could not name itself"
    if _cuda_initialised():
        return "an import initialised the CUDA driver"
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        return f"{threads} threads after the imports (a fork copies one)"
    return None


def load_lazy_libraries() -> list[str]:
    """Map the cuDNN sub-libraries (about 1 GB of code) that cuDNN would otherwise load (dlopen) in each worker's first
    convolution, inside its priming step. Mapping code initialises no CUDA and starts no thread, and the forked workers
    share the pages. Returns the names loaded; none where torch has no cuDNN.

    >>> all(name.startswith("libcudnn_") for name in load_lazy_libraries())
    True
    """
    with open("/proc/self/maps") as maps:
        folders = {Path(line.split()[-1]).parent for line in maps if "/libcudnn.so" in line}
    loaded = []
    for library in sorted(lib for folder in folders for lib in folder.glob("libcudnn_*.so*")):
        with contextlib.suppress(OSError):  # one whose dependencies are absent: cuDNN does without it too
            ctypes.CDLL(str(library))
            loaded.append(library.name)
    return loaded




def _cuda_initialised() -> bool:
    """Whether this process has initialised the CUDA driver (cuInit), after which a forked child cannot use CUDA.
    Merely loaded is fine: torch 2.11 maps libcuda at import. cuCtxGetCurrent answers without initialising.

    >>> _cuda_initialised()  # the doctest process never touches CUDA
    False
    """
    with open("/proc/self/maps") as maps:
        if "libcuda.so" not in maps.read():
            return False
    current = ctypes.c_void_p()
    return ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(current)) != CUDA_ERROR_NOT_INITIALIZED


def _serve(sock: socket.socket) -> tuple[dict, list[int], int] | None:
    """Fork a worker per request until the kit closes the socket (then None). Returns, in each forked worker, its
    request, its file descriptors (stdin, stdout, stderr) and the one to close once it has taken them."""
    while True:
        readable = select.select([sock], [], [], POLL_S)[0]
        try:
            _report_exits(sock)
            if not readable:
                continue
            message, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 3)
            if not message:
                return None
            set_up_r, set_up_w = os.pipe()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                sock.close()
                os.close(set_up_r)
                return json.loads(message), fds, set_up_w
            os.close(set_up_w)
            while not select.select([set_up_r], [], [], POLL_S)[0]:  # EOF once the worker has its group, streams,
                if supervise.suspended(pid):  # name...: Popen returns after exec too; but one suspended (SIGSTOP) in
                    break                     # its set-up is the kit's to time out, not to wait for
            os.close(set_up_r)
            pidfd = os.pidfd_open(pid)  # our unreaped child: this pidfd is that process, whatever happens to us
            try:
                socket.send_fds(sock, [json.dumps({"started": pid}).encode()], [pidfd])
            finally:
                for fd in (*fds, pidfd):
                    os.close(fd)
        except OSError:  # the kit is gone
            return None


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status),
                              "cpu_s": usage.ru_utime + usage.ru_stime}).encode())


def _become_worker(request: dict, fds: list[int], set_up: int) -> NoReturn:
    """In a forked child: take the job's group, streams, name, environment, cores and directory (then close `set_up`
    to say so); run the worker."""
    os.setpgid(0, 0)
    for fd, std in zip(fds, (0, 1, 2)):
        os.dup2(fd, std)
        os.close(fd)
    import setproctitle  # noqa: PLC0415 - in the forked worker only (preloaded by name)

    setproctitle.setproctitle(request["title"])  # first: it finds the room for the title through the environment
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request["cores"] is not None:
        os.sched_setaffinity(0, request["cores"])
    spec = importlib.util.find_spec(f"{WORKER_MODULE}.__main__")
    assert spec is not None and spec.origin is not None  # the worker package is installed: a file of it
    sys.argv = [spec.origin, *request["args"]]  # as `-m` sets it
    os.close(set_up)
    from colloc_kit.worker.train import leave, main  # noqa: PLC0415 - in the forked worker only (preloaded by name)

    leave(main(request["args"]))


def main(fd: int, kit: int, extra: list[str]) -> NoReturn:
    """The zygote process: dies with the kit (pid `kit`), imports, says whether forking is safe, then forks workers
    until the kit goes."""
    supervise.die_with_parent(kit)
    sock = socket.socket(fileno=fd)
    why = _preload(extra)
    try:
        sock.send(json.dumps({"ok": why is None, "why": why}).encode())
    except OSError:  # the kit is gone already
        why = "the kit is gone"
    forked = _serve(sock) if why is None else None
    if forked is None:  # nothing to flush, and tearing down torch's modules would only cost time
        os._exit(0)
    _become_worker(*forked)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
