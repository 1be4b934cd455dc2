"""Which MPS daemons run on this machine, which of them a new run must not share a GPU with, and the refusal that
names each one and how to stop it.

    >>> detect_running_daemons()   # doctest: +SKIP
    [RunningDaemon(pid=4121, kind='control', user='ana', pipe_dir='/tmp/nvidia-mps')]
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import psutil

from colloc_kit.errors import GpuStateError
from colloc_kit.gpu.pids import alive, read_pid, username

__all__ = ["CONTROL_BINARY", "DEFAULT_PIPE_DIR", "PID_FILE", "PROCESS_PREFIX", "RunningDaemon", "blocking_daemons",
           "control_status", "default_pipe_daemons", "describe_daemons", "detect_running_daemons", "one_scan",
           "refuse_running_daemons"]

CONTROL_BINARY = "nvidia-cuda-mps-control"
DEFAULT_PIPE_DIR = Path("/tmp/nvidia-mps")
PID_FILE = "nvidia-cuda-mps-control.pid"
PROCESS_PREFIX = "nvidia-cuda-mps"  # what `pgrep nvidia-cuda-mps` matches: the control daemon and its servers


@dataclass(frozen=True)
class RunningDaemon:
    """An MPS process found on the machine: `kind` is "control" or "server"; `pipe_dir` is None where unreadable;
    `device` is its CUDA_VISIBLE_DEVICES (the GPU it serves), None where unset or unreadable."""

    pid: int
    kind: str
    user: str | None
    pipe_dir: str | None
    device: str | None = None


_SCANS: list[dict[str, list[RunningDaemon]]] = []  # the open `one_scan` block: {default pipe dir: daemons found}


@contextlib.contextmanager
def one_scan() -> Iterator[None]:
    """Inside the block the machine's processes are scanned for MPS daemons once: the checks made before anything
    starts (every mode on every GPU of every experiment of a command) read one state of the machine, not a scan
    each (156 scans for `seed-33` on four GPUs). Nested blocks share the outer one's scan.

    >>> with one_scan():
    ...     detect_running_daemons() == detect_running_daemons()
    True
    """
    if _SCANS:
        yield
        return
    _SCANS.append({})
    try:
        yield
    finally:
        _SCANS.clear()


def detect_running_daemons(default_pipe_dir: Path | None = DEFAULT_PIPE_DIR) -> list[RunningDaemon]:
    """MPS control daemons and servers running now: processes named nvidia-cuda-mps-*, and the daemon whose pid
    file sits in the default pipe directory (/tmp/nvidia-mps); inside `one_scan`, as its first scan found them.

    >>> detect_running_daemons()   # doctest: +SKIP
    [RunningDaemon(pid=4121, kind='control', user='ana', pipe_dir='/tmp/nvidia-mps')]
    """
    if not _SCANS:
        return _scan(default_pipe_dir)
    key = str(default_pipe_dir)
    if key not in _SCANS[0]:
        _SCANS[0][key] = _scan(default_pipe_dir)
    return list(_SCANS[0][key])


def _scan(default_pipe_dir: Path | None) -> list[RunningDaemon]:
    found: dict[int, RunningDaemon] = {}
    for proc in psutil.process_iter(["name", "status"]):  # both from one read of /proc/<pid>/stat: the rest only
        name = proc.info["name"] or ""                     # for MPS's few processes (a 64-core host runs hundreds)
        if not name.startswith(PROCESS_PREFIX) or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        info = proc.as_dict(["cmdline", "username"])
        words = " ".join([name, *(info["cmdline"] or [])])
        try:
            env = proc.environ()
            pipe_dir: str | None = env.get("CUDA_MPS_PIPE_DIRECTORY", str(DEFAULT_PIPE_DIR))
            device: str | None = env.get("CUDA_VISIBLE_DEVICES")
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pipe_dir = device = None
        found[proc.pid] = RunningDaemon(proc.pid, "server" if "server" in words else "control", info["username"],
                                        pipe_dir, device)
    if default_pipe_dir is not None:
        pid = read_pid(Path(default_pipe_dir) / PID_FILE)
        if pid is not None and alive(pid) and (pid not in found or found[pid].pipe_dir is None):  # root's: no environ
            found[pid] = RunningDaemon(pid, "control", username(pid), str(default_pipe_dir))
    return sorted(found.values(), key=lambda d: d.pid)


def blocking_daemons(default_pipe_dir: Path = DEFAULT_PIPE_DIR, allow_pipe_dir: str | None = None,
                     device: str | None = None) -> list[RunningDaemon]:
    """The running MPS daemons a new run on `device` (a GPU UUID; None: any GPU) must not share the GPU with: this
    user's, and the default pipe dir's; a daemon pinned by UUID to another GPU (a cell on another GPU) does not
    block (one named by index may be this GPU: it blocks)."""
    me = psutil.Process().username()
    return [d for d in detect_running_daemons(default_pipe_dir)
            if (d.user == me or d.pipe_dir == str(default_pipe_dir)) and d.pipe_dir != allow_pipe_dir
            and not (device and _is_uuid(d.device) and d.device != device)]


def _is_uuid(device: str | None) -> bool:
    return device is not None and device.startswith(("GPU-", "MIG-"))


def default_pipe_daemons() -> list[RunningDaemon]:
    """The daemon of the default pipe directory, if one runs: every CUDA process outside an MPS slot becomes its client.

    >>> default_pipe_daemons()   # doctest: +SKIP
    []
    """
    return [d for d in detect_running_daemons(DEFAULT_PIPE_DIR) if d.pipe_dir == str(DEFAULT_PIPE_DIR)]


def describe_daemons(daemons: Iterable[RunningDaemon]) -> str:
    """The daemons in a few words, e.g. 'MPS control pid 4121 of ana, pipe dir /tmp/nvidia-mps'.

    >>> describe_daemons([RunningDaemon(4121, "control", "ana", "/tmp/nvidia-mps")])
    'MPS control pid 4121 of ana, pipe dir /tmp/nvidia-mps'
    """
    return "; ".join(f"MPS {d.kind} pid {d.pid} of {d.user or 'an unknown user'}, pipe dir {d.pipe_dir or 'unknown'}"
                     for d in daemons)


def refuse_running_daemons(daemons: Iterable[RunningDaemon], mode: str = "mps") -> None:
    """Raise GpuStateError naming each daemon and how to stop it; for mode mps, also how to reuse it explicitly."""
    daemons = list(daemons)
    if not daemons:
        return
    lines = []
    for d in daemons:
        how = (f"stop it with `echo quit | CUDA_MPS_PIPE_DIRECTORY={d.pipe_dir} {CONTROL_BINARY}`" if d.pipe_dir
               else f"stop it with `kill {d.pid}` (as {d.user or 'its owner'})")
        lines.append(f"MPS {d.kind} pid {d.pid} (user {d.user}, pipe dir {d.pipe_dir or 'unknown'}): {how}")
    reuse = next((d.pipe_dir for d in daemons if d.kind == "control" and d.pipe_dir and mode == "mps"), None)
    consequence = ("a run beside it would share the GPU with its jobs" if mode == "mps" else
                   f"mode {mode}'s jobs would become its clients, and the run would measure MPS, not {mode}")
    raise GpuStateError(
        f"an MPS daemon is already running, and {consequence}:\n  "
        + "\n  ".join(lines)
        + ("\nor reuse it explicitly with the mps option reuse_pipe_dir="
           f"{reuse} (the kit then neither starts nor stops it)" if reuse else ""))


def control_status() -> dict[str, Any]:
    """For `colloc-kit info`: whether MPS control is available and which MPS daemons run.

    >>> control_status()   # doctest: +SKIP
    {'control_binary': '/usr/bin/nvidia-cuda-mps-control', 'daemons_running': []}
    """
    return {"control_binary": shutil.which(CONTROL_BINARY),
            "daemons_running": [asdict(d) for d in detect_running_daemons()]}
