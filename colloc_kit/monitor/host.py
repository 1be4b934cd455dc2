"""Host series through psutil: CPU and memory of the machine, and of each job's processes (children included).

`JobProcesses` turns the launcher's {worker pid: job id} into {pid: job id} over the workers and all their
descendants (data-loader workers, compile workers), refreshed at most once a second since walking /proc costs.

    >>> jobs = JobProcesses(lambda: {4242: "j0-resnet18"})                # doctest: +SKIP
    >>> HostJobSource(jobs).read(events.now())                            # doctest: +SKIP
    [(1763640000.1, 'j0-resnet18', 3, 131.5, 3, 2871.2)]
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

import psutil
import pyarrow as pa

__all__ = ["HostJobSource", "HostSource", "JobProcesses", "MB", "REFRESH_S"]

MB = 2**20
REFRESH_S = 1.0


class JobProcesses:
    """Which processes belong to which job: the workers the launcher reports, and their descendants."""

    def __init__(self, job_pids: Callable[[], Mapping[int, str]]):
        self.job_pids = job_pids
        self.by_pid: dict[int, str] = {}
        self.processes: dict[int, psutil.Process] = {}  # kept, so cpu_percent measures since the last sample
        self.ever_had_jobs = False
        self._workers: dict[int, str] = {}
        self._refreshed = -float("inf")

    def current(self) -> dict[int, str]:
        """{pid: job id} for every live process of every job."""
        workers = dict(self.job_pids())
        if workers != self._workers or time.monotonic() - self._refreshed >= REFRESH_S:
            self._refresh(workers)
        return self.by_pid

    def _refresh(self, workers: dict[int, str]) -> None:
        children = _children_map() if workers else {}
        by_pid = {pid: job for root, job in workers.items() for pid in _family(root, children)}
        for pid in by_pid.keys() - self.processes.keys():
            try:
                self.processes[pid] = psutil.Process(pid)
            except psutil.Error:  # already gone
                continue
            _cpu_percent(self.processes[pid])  # the first call only starts psutil's measurement
        self.processes = {pid: p for pid, p in self.processes.items() if pid in by_pid}
        self.by_pid = {pid: job for pid, job in by_pid.items() if pid in self.processes}
        self._workers, self._refreshed = workers, time.monotonic()
        self.ever_had_jobs = self.ever_had_jobs or bool(workers)


def _children_map() -> dict[int, list[int]]:
    """{parent pid: child pids} from one pass over the process table."""
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter():
        try:
            children.setdefault(proc.ppid(), []).append(proc.pid)
        except psutil.Error:  # ended while we looked
            continue
    return children


def _family(root: int, children: dict[int, list[int]]) -> list[int]:
    """`root` and all its descendants."""
    family, todo = [], [root]
    while todo:
        pid = todo.pop()
        family.append(pid)
        todo += children.get(pid, [])
    return family


def _cpu_percent(proc: psutil.Process) -> float | None:
    try:
        return proc.cpu_percent(None)
    except psutil.Error:
        return None


class HostSource:
    """The `samples_host` series: CPU utilization over all cores (0-100), the share stolen by the hypervisor
    (`cpu_steal_pct`, Linux guests), the mean core frequency, and memory of the whole machine: what can make a lone
    host-bound job swing between repeats."""

    series = "samples_host"
    schema = pa.schema([("t", pa.float64()), ("cpu_util_pct", pa.float64()), ("cpu_steal_pct", pa.float64()),
                        ("cpu_freq_mhz", pa.float64()), ("mem_used_mb", pa.float64()), ("mem_total_mb", pa.float64())])

    def __init__(self) -> None:
        self.absent: dict[str, str] = {}
        self.notes: list[str] = []
        psutil.cpu_percent(None)  # starts the measurement; each read gives the utilization since the last one
        psutil.cpu_times_percent(None)

    def read(self, t: float) -> list[tuple]:
        """One row at `t`: host CPU busy and steal (%), CPU clock (MHz), memory used and total (MB)."""
        memory = psutil.virtual_memory()
        steal = getattr(psutil.cpu_times_percent(None), "steal", None)
        freq = psutil.cpu_freq()
        return [(t, psutil.cpu_percent(None), steal, freq.current if freq else None,
                 (memory.total - memory.available) / MB, memory.total / MB)]

    def close(self) -> None:
        """Nothing to free (psutil keeps no handle)."""


class HostJobSource:
    """The `samples_host_job` series: per job, its live processes, their CPU (100 = one core), the distinct cores
    they were last on (`cores`: fewer than its busy processes, and they took turns on a core; None where the OS does
    not say) and resident memory."""

    series = "samples_host_job"
    schema = pa.schema([("t", pa.float64()), ("job", pa.string()), ("processes", pa.int64()),
                        ("cpu_core_pct", pa.float64()), ("cores", pa.int64()), ("rss_mb", pa.float64())])

    def __init__(self, jobs: JobProcesses):
        self.jobs = jobs
        self.absent: dict[str, str] = {}
        self.notes: list[str] = []

    def read(self, t: float) -> list[tuple]:
        """One row per job at `t`: its processes, their CPU use (% of one core), the distinct cores they were last on
        and their resident memory (MB), summed."""
        totals: dict[str, list[float]] = {}
        cores: dict[str, set[int | None]] = {}
        for pid, job in self.jobs.current().items():
            proc = self.jobs.processes[pid]
            try:
                with proc.oneshot():
                    cpu, rss, core = proc.cpu_percent(None), proc.memory_info().rss, _core_of(proc)
            except psutil.Error:  # ended since the last refresh
                continue
            total = totals.setdefault(job, [0, 0.0, 0.0])
            total[0] += 1
            total[1] += cpu
            total[2] += rss / MB
            cores.setdefault(job, set()).add(core)
        return [(t, job, int(n), cpu, None if None in cores[job] else len(cores[job]), rss)
                for job, (n, cpu, rss) in totals.items()]

    def close(self) -> None:
        """Nothing to free (psutil keeps no handle)."""


def _core_of(proc: psutil.Process) -> int | None:
    """The CPU core the process last ran on (Linux, FreeBSD); None where psutil cannot tell."""
    return proc.cpu_num() if hasattr(proc, "cpu_num") else None
