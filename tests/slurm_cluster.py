"""A real single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian's packages, on localhost.

Everything lives in one private folder (configuration, state, logs, munge key and socket), on ports of its own, so
it touches no system service; the daemons run in the foreground as this process's children and `stop()` ends
them. Needs root (slurmd launches tasks as their user) and the binaries (`apt-get install slurm-wlm`); `why_not()`
says what is missing.

    >>> with SlurmCluster(tmp_path) as cluster:          # doctest: +SKIP
    ...     subprocess.run(["sbatch", "--wrap", "true"], env=cluster.env)
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
START_TIMEOUT_S = 60.0
DRAIN_GRACE_S = 30.0  # a finished task's wrapper (submitit writing its result) may still be in the queue


def why_not() -> str | None:
    """Why a cluster cannot start here, or None."""
    missing = [name for name in (*DAEMONS, "sbatch", "squeue", "sinfo") if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install slurm-wlm)"
    if os.geteuid() != 0:
        return "slurmd must run as root to launch tasks"
    return None


class SlurmCluster:
    """munged + slurmctld + slurmd for one node (`localhost`, CPU only, partition `cpu`), each run in the foreground
    as a child of this process, so that `stop()` ends exactly them, whatever happened during start."""

    def __init__(self, root: Path, port: int | None = None):
        self.root = Path(root)
        self.port = port or _free_port()
        self.conf = self.root / "slurm.conf"
        self.socket = self.root / "munge" / "munge.socket"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> "SlurmCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(self._config())
        try:
            self._daemon("munged", ["munged", "--foreground", "--force", f"--socket={self.socket}",
                                    f"--key-file={key}", f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                                    f"--log-file={self.root / 'log' / 'munged.log'}",
                                    f"--seed-file={self.root / 'munge' / 'munged.seed'}"])
            self._wait("munged", lambda: self.socket.exists())
            self._daemon("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
            self._daemon("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", "localhost"])
            self._wait("slurmd", lambda: self._sinfo() == "idle")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Let the jobs still in the queue end (cancel them after a grace period), then end the daemons this cluster
        started, newest first (SIGTERM, then SIGKILL): no job step outlives its slurmd."""
        if {"slurmctld", "slurmd"} <= set(self.daemons):
            if not self._queue_empty_within(DRAIN_GRACE_S):
                subprocess.run(["scancel", f"--user={pwd.getpwuid(os.getuid()).pw_name}"], env=self.env,
                               capture_output=True, timeout=30)
                self._queue_empty_within(DRAIN_GRACE_S)
        for name in reversed(list(self.daemons)):
            daemon = self.daemons.pop(name)
            daemon.terminate()
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()

    def log(self, name: str, lines: int = 20) -> str:
        path = self.root / "log" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _daemon(self, name: str, argv: list[str]) -> None:
        with open(self.root / "log" / f"{name}.out", "wb") as out:
            self.daemons[name] = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                                  stderr=subprocess.STDOUT)

    def _wait(self, name: str, ready) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            for daemon_name, daemon in self.daemons.items():
                if daemon.poll() is not None:
                    raise RuntimeError(f"{daemon_name} exited with {daemon.returncode}: {self.log(daemon_name)} "
                                       f"{(self.root / 'log' / f'{daemon_name}.out').read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {START_TIMEOUT_S:.0f} s; its log: {self.log(name)}")
            time.sleep(0.2)

    def _queue_empty_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                listing = subprocess.run(["squeue", "--noheader"], env=self.env, capture_output=True, text=True,
                                         timeout=30)
            except subprocess.TimeoutExpired:
                continue
            if listing.returncode == 0 and not listing.stdout.strip():
                return True
            time.sleep(0.3)
        return False

    def _sinfo(self) -> str:
        try:
            return subprocess.run(["sinfo", "--noheader", "--format=%t"], env=self.env, capture_output=True,
                                  text=True, timeout=30).stdout.strip()
        except subprocess.TimeoutExpired:
            return ""

    def _config(self) -> str:
        r = self.root
        return "\n".join([
            "ClusterName=colloctest", "SlurmctldHost=localhost(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={self.port}", f"SlurmdPort={self.port + 1}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            f"StateSaveLocation={r / 'state'}", f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}", f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/builtin", "MinJobAge=300", "KillWait=5",
            f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN",
            "PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP", ""])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
