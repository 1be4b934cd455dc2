"""What this machine offers: host, GPUs (through the NVML wrapper), software versions, the project's git commit.

Used by `colloc-kit info`, and described once per experiment into its folder (`machines/<host>-<time>.json`, which
every run's manifest names). Never raises for a missing GPU or feature: the value is absent and a reason is given.

    >>> info = describe()
    >>> info["gpus"], info["gpu_reason"]           # on a machine without a GPU   # doctest: +SKIP
    ([], 'NVML did not start: Driver Not Loaded; is an NVIDIA driver installed?')
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import psutil

from colloc_kit import __version__
from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.gpu.mps_detect import control_status

__all__ = ["PACKAGES", "COMPUTE_MODES", "chosen_gpus", "describe", "git_commit", "gpu_list", "host", "versions",
           "in_words"]

PACKAGES = ("torch", "torchvision", "nvidia-ml-py", "numpy", "pandas")
COMPUTE_MODES = {0: "default (shared)", 1: "exclusive thread", 2: "prohibited", 3: "exclusive process"}  # NVML's


def describe() -> dict:
    """Host, GPUs, versions and git commit as plain data (JSON-ready)."""
    gpus, reason = gpu_list()
    return {
        "host": host(),
        "gpus": gpus,
        "gpu_reason": reason,
        "versions": versions(),
        "git_commit": git_commit(),
        "mps": control_status(),
    }


def chosen_gpus(request: str | list[int], described: list[dict], reason: str | None) -> list[dict]:
    """The described GPUs that `request` names ("all", or a list of indices), or BadInput saying what exists.

    >>> [g["index"] for g in chosen_gpus([1, 0], describe()["gpus"], None)]     # doctest: +SKIP
    [1, 0]
    """
    if not described:
        raise BadInput(f"gpus: this machine shows no GPU ({reason}); leave --gpus out, or run where the GPUs are")
    if request == "all":
        return list(described)
    by_index = {gpu["index"]: gpu for gpu in described}
    missing = [i for i in request if i not in by_index]
    if missing:
        raise BadInput(f"gpus: GPU {', '.join(map(str, missing))} does not exist; this machine has {len(described)} "
                       f"GPU(s), numbered {', '.join(map(str, by_index))}; give some of them, or all")
    return [by_index[i] for i in request]


def host() -> dict:
    """Hostname, platform, CPU model, logical cores and memory."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "memory_mb": round(psutil.virtual_memory().total / 2**20),
    }


def gpu_list() -> tuple[list[dict], str | None]:
    """One dict per GPU (name, memory, UUID, MIG and GPM support, compute mode), or [] and why there are none."""
    try:
        with nvml.session() as lib:
            driver = nvml.optional_named(lib, "nvmlSystemGetDriverVersion")
            cuda = nvml.optional_named(lib, "nvmlSystemGetCudaDriverVersion_v2")
            return [_gpu(lib, i, driver, cuda) for i in range(lib.nvmlDeviceGetCount())], None
    except nvml.NvmlUnavailable as exc:
        return [], str(exc)


def _gpu(lib: Any, index: int, driver: nvml.Reading, cuda: nvml.Reading) -> dict:
    device = nvml.Device.at(lib, index)
    memory = lib.nvmlDeviceGetMemoryInfo(device.handle)
    mig, gpm = device.read("nvmlDeviceGetMigMode"), device.read("nvmlGpmQueryDeviceSupport")
    compute_mode, uuid = device.read("nvmlDeviceGetComputeMode"), device.read("nvmlDeviceGetUUID")
    return {
        "index": index,
        "name": device.name,
        "uuid": nvml.text(uuid.value) if uuid.value else None,
        "memory_mb": round(memory.total / 2**20),
        "driver": nvml.text(driver.value) if driver.value else None,
        "cuda_driver": f"{cuda.value // 1000}.{cuda.value % 1000 // 10}" if cuda.value else None,
        "mig_capable": mig.value is not None,
        "mig_mode": {"current": mig.value[0], "pending": mig.value[1]} if mig.value else None,
        "mig_reason": mig.reason,
        "gpm_supported": bool(gpm.value.isSupportedDevice) if gpm.value is not None else False,
        "gpm_reason": gpm.reason,
        "compute_mode": compute_mode.value,
    }


def versions() -> dict:
    """Python's, the kit's and its main packages' versions (None where one is missing)."""
    found: dict[str, str | None] = {"python": platform.python_version(), "colloc_kit": __version__}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def git_commit() -> str | None:
    """The commit of the checkout the package runs from ('+dirty' when it has local changes), if it is one."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def in_words(gpu: dict) -> dict:
    """One GPU of `describe()` as a reader reads it: MIG mode and compute mode in words, not NVML's numbers.

    >>> in_words({"mig_mode": {"current": 0, "pending": 1}, "compute_mode": 0})
    {'mig_mode': 'disabled (enabled after a GPU reset)', 'compute_mode': 'default (shared)'}
    >>> in_words({"mig_mode": None, "compute_mode": 3})
    {'mig_mode': 'not supported', 'compute_mode': 'exclusive process'}
    """
    mig, state = gpu.get("mig_mode"), {0: "disabled", 1: "enabled"}
    if mig is None:
        mig_words = "not supported"
    else:
        mig_words = state.get(mig["current"], str(mig["current"])) + (
            f" ({state.get(mig['pending'], mig['pending'])} after a GPU reset)" if mig["pending"] != mig["current"]
            else "")
    mode = gpu.get("compute_mode")
    return {**gpu, "mig_mode": mig_words, "compute_mode": COMPUTE_MODES.get(mode, mode) if mode is not None else None}
