"""The kit's one door to NVML: every module asks this wrapper, never `pynvml` directly.

The backend is the real `pynvml` module (from nvidia-ml-py) unless a stand-in with the same names is installed
with `use_backend` (the MIG simulator, tests' fakes). Initialisation is reference-counted, so nested sessions
(monitor inside launcher inside a notebook) share one `nvmlInit`.

    >>> from colloc_kit.gpu import nvml
    >>> with nvml.session() as lib:                      # doctest: +SKIP
    ...     h = lib.nvmlDeviceGetHandleByIndex(0)
    ...     nvml.optional(lib.nvmlDeviceGetPowerUsage, h)
    Reading(value=68512, reason=None)
"""

from __future__ import annotations

import importlib
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from colloc_kit.errors import BadInput, NvmlUnavailable

__all__ = ["Device", "Reading", "backend", "cuda_available", "describe_error", "device_uuid", "is_nvml_error",
           "optional", "optional_named", "require_gpu_index", "session", "text", "use_backend"]

_lock = threading.RLock()
_backend: Any = None  # None: import pynvml on first use
_init_count = 0


def backend() -> Any:
    """The active NVML module (real `pynvml` or an installed stand-in); raises NvmlUnavailable if none loads."""
    global _backend
    with _lock:
        if _backend is None:
            try:
                _backend = importlib.import_module("pynvml")
            except ImportError as exc:
                raise NvmlUnavailable(
                    f"the NVML bindings are not installed ({exc}); install them with `pip install nvidia-ml-py`",
                    reason="the NVML bindings are not installed") from exc
        return _backend


@contextmanager
def use_backend(module: Any) -> Iterator[Any]:
    """Make `module` (anything with pynvml's names) the NVML every kit module uses, until the block ends.

    >>> with use_backend(fake_nvml):   # doctest: +SKIP
    ...     colloc_kit.machine.describe()
    """
    global _backend, _init_count
    with _lock:
        saved = (_backend, _init_count)
        _backend, _init_count = module, 0
    try:
        yield module
    finally:
        with _lock:
            _backend, _init_count = saved


@contextmanager
def session() -> Iterator[Any]:
    """Initialise NVML for the block (nested blocks share one init) and yield the backend module.

    Raises NvmlUnavailable with the driver's reason where NVML cannot start (no GPU, no driver).
    """
    global _init_count
    lib = backend()
    with _lock:
        if _init_count == 0:
            try:
                lib.nvmlInit()
            except Exception as exc:  # NVMLError subclasses, or OSError when libnvidia-ml.so is missing
                raise NvmlUnavailable(f"NVML did not start: {describe_error(exc)}; "
                                      "is an NVIDIA driver installed?", reason=describe_error(exc)) from exc
        _init_count += 1
    try:
        yield lib
    finally:
        with _lock:
            _init_count -= 1
            if _init_count == 0:
                try:
                    lib.nvmlShutdown()
                except Exception:
                    pass


def require_gpu_index(index: int) -> None:
    """Refuse (BadInput) a GPU index this machine does not have, before a job is started on it. Without NVML there
    is nothing to count here (the worker's check_job refuses CUDA jobs then, saying why)."""
    try:
        with session() as lib:
            count = lib.nvmlDeviceGetCount()
    except NvmlUnavailable:
        return
    if index >= count:
        raise BadInput(f"GPU {index} does not exist: this machine has {count} GPU(s), numbered from 0; "
                       f"give --gpu 0{f' to {count - 1}' if count > 1 else ''}")


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU here. torch (seconds to import, in every notebook's kernel) is asked only where
    NVML counts a GPU: where it counts none, or cannot start (no driver), torch sees none either."""
    try:
        with session() as lib:
            if not optional(lib.nvmlDeviceGetCount).value:  # none counted, or NVML's error counting them
                return False
    except NvmlUnavailable:
        return False
    import torch  # noqa: PLC0415 - heavy: only where NVML sees a GPU

    return torch.cuda.is_available()


@dataclass(frozen=True)
class Reading:
    """A value NVML gave, or None and the reason it could not (not supported, no permission, ...)."""

    value: Any
    reason: str | None = None


def optional(fn: Callable[..., Any], *args: Any) -> Reading:
    """Call an NVML function; an NVML error becomes a Reading with its reason instead of an exception."""
    try:
        return Reading(fn(*args))
    except Exception as exc:
        if not is_nvml_error(exc):
            raise
        return Reading(None, describe_error(exc))


def optional_named(lib: Any, function: str, *args: Any) -> Reading:
    """`optional` of the function named `function`; absent, with why, where the bindings (older ones, a simulator)
    lack it."""
    fn = getattr(lib, function, None)
    return optional(fn, *args) if fn is not None else Reading(None, f"{function} is not in these NVML bindings")


@dataclass(frozen=True)
class Device:
    """One GPU as NVML sees it, inside a `session()`: its index and handle, and what the kit reads of it.

    >>> with session() as lib:                                           # doctest: +SKIP
    ...     gpu = Device.at(lib, 0)
    ...     gpu.name, gpu.memory_mib, gpu.read("nvmlDeviceGetMigMode")
    ('NVIDIA H100 80GB HBM3', 81559, Reading(value=[0, 0], reason=None))
    """

    lib: Any
    index: int
    handle: Any

    @classmethod
    def at(cls, lib: Any, index: int) -> "Device":
        """GPU `index` of the session's backend `lib` (an NVML error where there is none)."""
        return cls(lib, index, lib.nvmlDeviceGetHandleByIndex(index))

    @property
    def name(self) -> str:
        """The product name, e.g. 'NVIDIA H100 80GB HBM3'."""
        return text(self.lib.nvmlDeviceGetName(self.handle))

    @property
    def uuid(self) -> str:
        """'GPU-...': what CUDA_VISIBLE_DEVICES names unambiguously."""
        return text(self.lib.nvmlDeviceGetUUID(self.handle))

    @property
    def memory_mib(self) -> int:
        """Total memory in MiB."""
        return int(self.lib.nvmlDeviceGetMemoryInfo(self.handle).total // 2**20)

    def read(self, function: str, *args: Any) -> Reading:
        """The device function `function` (e.g. "nvmlDeviceGetMigMode") as a Reading: a value, or None and why."""
        return optional_named(self.lib, function, self.handle, *args)


def is_nvml_error(exc: BaseException) -> bool:
    """True for the backend's NVMLError (real or simulated; pynvml raises NVMLError_FunctionNotFound for a function
    the driver lacks). Not for an AttributeError: a typo in a reader must fail loudly, not become an absent column."""
    error_class = getattr(_backend, "NVMLError", None)
    return (error_class is not None and isinstance(exc, error_class)) or isinstance(exc, NotImplementedError)


def describe_error(exc: BaseException) -> str:
    """A short text for an NVML error: the driver's own string where it has one."""
    text = str(exc).strip()
    return text or type(exc).__name__


def text(value: Any) -> str:
    """NVML returns bytes from older bindings and str from newer ones; always give str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def device_uuid(index: int) -> str:
    """The UUID of GPU `index` ("GPU-..."): what CUDA_VISIBLE_DEVICES names unambiguously, whatever else is set.

    >>> device_uuid(0)                                   # doctest: +SKIP
    'GPU-5d3f0c52-...'
    """
    with session() as lib:
        return Device.at(lib, index).uuid
