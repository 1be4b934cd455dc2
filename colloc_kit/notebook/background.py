"""Work in a worker thread that a Stop button or Kernel > Interrupt stops, the way Ctrl-C stops it in a terminal.

    >>> task = Background(lambda: colloc_kit.run(jobs, mode="naive", copies=2), on_done=print)   # doctest: +SKIP
    >>> task.start(); task.stop(); task.join()                                                   # doctest: +SKIP

A widget callback runs in a kernel thread that SIGINT does not reach, and a long run there would block the kernel's
other messages. So the work runs in a thread of its own, and stopping it raises KeyboardInterrupt inside that thread
(CPython's PyThreadState_SetAsyncExc): `colloc_kit.run` already turns a KeyboardInterrupt into a clean stop (every
job stopped, the mode restored, the run kept and marked interrupted). `route_kernel_interrupts()` makes the kernel's
SIGINT stop every running Background while no cell runs; while a cell runs, the interrupt goes to that cell as usual.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from typing import Any, Callable

__all__ = ["Background", "route_kernel_interrupts", "stop_all"]

_running: set["Background"] = set()
_lock = threading.Lock()
_previous_handler: Any = None


class Background:
    """`work()` in a daemon-less worker thread; `on_done(result, error)` is called in that thread when it ends
    (error: the exception, a KeyboardInterrupt when stopped; result None then)."""

    def __init__(self, work: Callable[[], Any], on_done: Callable[[Any, BaseException | None], None]):
        self.work, self.on_done = work, on_done
        self.thread = threading.Thread(target=self._main, name="colloc-kit-background")
        self.stop_requested = False

    def start(self) -> "Background":
        """Start the work in its thread; `on_done(result, error)` is called when it ends. Returns self."""
        with _lock:
            _running.add(self)
        self.thread.start()
        return self

    @property
    def running(self) -> bool:
        """True while the work's thread is alive."""
        return self.thread.is_alive()

    def stop(self) -> None:
        """Raise KeyboardInterrupt in the worker thread (once: a second one would land in its clean-up)."""
        if self.stop_requested or not self.running:
            return
        self.stop_requested = True
        assert self.thread.ident is not None  # running: the thread has started
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread.ident),
                                                   ctypes.py_object(KeyboardInterrupt))

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the work to end; True if it has."""
        self.thread.join(timeout)
        return not self.running

    def _main(self) -> None:
        result, error = None, None
        try:
            result = self.work()
        except BaseException as exc:  # KeyboardInterrupt from stop() included: on_done reports it
            error = exc
        finally:
            with _lock:
                _running.discard(self)
        self.on_done(result, error)


def stop_all() -> int:
    """Stop every running Background; how many there were."""
    with _lock:
        tasks = list(_running)
    for task in tasks:
        task.stop()
    return len(tasks)


def route_kernel_interrupts() -> bool:
    """Make SIGINT stop running Background work (and otherwise do what it did before). Call it from the main thread
    (a notebook cell); False where that is impossible. In an ipykernel the handler is the one the kernel restores
    after each cell, so it is in force while the kernel is idle and a panel's run goes on in the background."""
    global _previous_handler
    if threading.current_thread() is not threading.main_thread():
        return False
    kernel = _ipykernel()
    if kernel is not None and hasattr(kernel, "saved_sigint_handler"):
        if kernel.saved_sigint_handler is not _on_sigint:
            _previous_handler, kernel.saved_sigint_handler = kernel.saved_sigint_handler, _on_sigint
    elif signal.getsignal(signal.SIGINT) is not _on_sigint:
        _previous_handler = signal.signal(signal.SIGINT, _on_sigint)
    return True


def _on_sigint(signum: int, frame: Any) -> None:
    if stop_all():
        return
    if callable(_previous_handler):
        _previous_handler(signum, frame)
    elif _previous_handler in (None, signal.SIG_DFL):
        raise KeyboardInterrupt


def _ipykernel() -> Any:
    try:
        from ipykernel.kernelbase import Kernel  # noqa: PLC0415 - optional: only where Jupyter is installed
    except ImportError:
        return None
    return Kernel.instance() if Kernel.initialized() else None
