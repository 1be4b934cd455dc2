"""The `samples_process` series: each GPU process's memory and, where NVML gives it, SM utilization, with its job id.

Processes are matched to jobs by pid (`host.JobProcesses`: workers and their children). Limits NVML sets:
- on MIG, per-process utilization does not exist: `sm_util_pct` is absent, with that reason;
- under MPS, the clients' SM activity is charged to the MPS server process (`process_name`
  nvidia-cuda-mps-server, no job id); the clients' rows carry their memory only;
- in a container with its own PID namespace, NVML reports host pids: no row matches a job (monitor.json notes it).

    >>> source = GpuProcessSource(lib, 0, [(None, handle)], jobs)        # doctest: +SKIP
    >>> source.read(events.now())                                        # doctest: +SKIP
    [(1763640000.1, 0, None, 4242, 'j0-resnet50', 'python', 3421.0, 38.0, 12.0)]
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import psutil
import pyarrow as pa

from colloc_kit.monitor.gpu_source import MB, call, probe
from colloc_kit.monitor.host import JobProcesses

__all__ = ["GpuProcessSource", "MPS_NOTE", "SCHEMA", "processes_unsupported"]

SCHEMA = pa.schema([
    ("t", pa.float64()), ("gpu", pa.int64()), ("gpu_instance_id", pa.int64()), ("pid", pa.int64()),
    ("job", pa.string()), ("process_name", pa.string()), ("gpu_mem_used_mb", pa.float64()),
    ("sm_util_pct", pa.float64()), ("mem_util_pct", pa.float64()),
])
MPS_NOTE = ("under MPS, NVML charges the clients' SM utilization to the MPS server process "
            "(process_name nvidia-cuda-mps-server); client rows carry their GPU memory")


def processes_unsupported(lib: Any, handle: Any) -> str | None:
    """Why NVML cannot list the GPU's compute processes, or None if it can."""
    _, reason = probe(lib, lib.nvmlDeviceGetComputeRunningProcesses, handle)
    return None if reason is None else f"NVML cannot list compute processes: {reason}"


class GpuProcessSource:
    """Rows for every compute process on GPU `index`; `targets` are (GPU instance id or None, handle) pairs."""

    series = "samples_process"
    schema = SCHEMA

    def __init__(self, lib: Any, index: int, targets: Sequence[tuple[int | None, Any]], jobs: JobProcesses):
        self.lib, self.index, self.targets, self.jobs = lib, index, targets, jobs
        self.absent: dict[str, str] = {}
        self.notes = [MPS_NOTE]
        self.rows_seen = self.rows_matched = 0
        self._names: dict[int, str | None] = {}
        self._last_us = int(time.time() * 1e6)  # NVML stamps utilization samples in CPU microseconds
        if any(gi is not None for gi, _ in targets):
            reason: str | None = "NVML has no per-process utilization on MIG"
        else:
            _, reason = probe(lib, self._utilization)
        if reason is not None:
            self.absent = {"sm_util_pct": reason, "mem_util_pct": reason}

    def read(self, t: float) -> list[tuple]:
        """One row per process on the GPU (or its instances) at `t`: pid, job, memory, SM and memory use."""
        lib, by_job = self.lib, self.jobs.current()
        utilization = {} if self.absent else self._utilization()
        rows = []
        for gi, handle in self.targets:
            for proc in call(lib, lib.nvmlDeviceGetComputeRunningProcesses, handle):
                used = proc.usedGpuMemory / MB if proc.usedGpuMemory is not None else None
                sm, mem = utilization.get(proc.pid, (None, None))
                job = by_job.get(proc.pid)
                rows.append((t, self.index, gi, proc.pid, job, self._name(proc.pid), used, sm, mem))
                self.rows_matched += job is not None
        self.rows_seen += len(rows)
        return rows

    def _utilization(self) -> dict[int, tuple[float, float]]:
        """{pid: (SM %, memory %)} from the samples NVML took since the last call."""
        lib = self.lib
        try:
            samples = call(lib, lib.nvmlDeviceGetProcessUtilization, self.targets[0][1], self._last_us)
        except Exception as exc:
            # no new samples since the last call: NVML says NOT_FOUND (pynvml raises "Success" for an empty list)
            if getattr(exc, "value", None) in (lib.NVML_ERROR_NOT_FOUND, lib.NVML_SUCCESS):
                return {}
            raise
        latest: dict[int, Any] = {}
        for sample in samples:
            if sample.pid not in latest or sample.timeStamp > latest[sample.pid].timeStamp:
                latest[sample.pid] = sample
            self._last_us = max(self._last_us, sample.timeStamp)
        return {pid: (float(s.smUtil), float(s.memUtil)) for pid, s in latest.items()}

    def _name(self, pid: int) -> str | None:
        if pid not in self._names:
            try:
                self._names[pid] = psutil.Process(pid).name()
            except psutil.Error:  # gone, or not visible from here (another PID namespace)
                self._names[pid] = None
        return self._names[pid]

    def close(self) -> None:
        """Nothing to free (NVML handles belong to the session)."""

    def unmatched_note(self) -> str | None:
        """A note when jobs ran and GPU processes were seen, yet no process matched a job's pid."""
        if self.rows_seen and not self.rows_matched and self.jobs.ever_had_jobs:
            return ("no GPU process matched a job's pid: NVML may report pids of another PID namespace "
                    "(a container); gpu_mem_used_mb per job is then unknown")
        return None

