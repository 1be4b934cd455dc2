"""A real single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian's packages, on localhost.

Everything lives in one private folder (configuration, state, logs, munge key and socket), on ports of its own, so
it touches no system service; `stop()` ends every daemon it started, by pid. Needs root (slurmd launches tasks as
their user) and the binaries (`apt-get install slurm-wlm`); `why_not()` says what is missing.

    >>> with SlurmCluster(tmp_path) as cluster:          # doctest: +SKIP
    ...     subprocess.run(["sbatch", "--wrap", "true"], env=cluster.env)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
START_TIMEOUT_S = 60.0


def why_not() -> str | None:
    """Why a cluster cannot start here, or None."""
    missing = [name for name in (*DAEMONS, "sbatch", "squeue", "sinfo") if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install slurm-wlm)"
    if os.geteuid() != 0:
        return "slurmd must run as root to launch tasks"
    return None


class SlurmCluster:
    """munged + slurmctld + slurmd for one node (`localhost`, CPU only, partition `cpu`)."""

    def __init__(self, root: Path, port: int | None = None):
        self.root = Path(root)
        self.port = port or _free_port()
        self.conf = self.root / "slurm.conf"
        self.socket = self.root / "munge" / "munge.socket"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.pids: dict[str, int] = {}

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
            self._daemon("munged", ["munged", "--force", f"--socket={self.socket}", f"--key-file={key}",
                                    f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                                    f"--log-file={self.root / 'log' / 'munged.log'}",
                                    f"--seed-file={self.root / 'munge' / 'munged.seed'}"],
                         self.root / "munge" / "munged.pid")
            self._daemon("slurmctld", ["slurmctld", "-f", str(self.conf)], self.root / "slurmctld.pid")
            self._daemon("slurmd", ["slurmd", "-f", str(self.conf), "-N", "localhost"], self.root / "slurmd.pid")
            self._wait_until_idle()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End the daemons this cluster started (by their pids), newest first; leave nothing running."""
        for name in reversed(list(self.pids)):
            _end(self.pids.pop(name))

    def log(self, name: str, lines: int = 20) -> str:
        path = self.root / "log" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _daemon(self, name: str, argv: list[str], pid_file: Path) -> None:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pid_file.exists():
            raise RuntimeError(f"{name} did not start (exit {done.returncode}): {done.stderr.strip()} "
                               f"{self.log(name)}")
        self.pids[name] = int(pid_file.read_text().split()[0])

    def _wait_until_idle(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=self.env, capture_output=True,
                                   text=True, timeout=30).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.3)
        raise RuntimeError(f"the node did not become idle (sinfo: {state!r}); slurmd log: {self.log('slurmd')}")

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


def _end(pid: int, timeout_s: float = 15.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
