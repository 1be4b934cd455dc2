"""One private NVIDIA MPS control daemon: started, checked, handed to jobs, and always shut down.

`MpsDaemon` runs `nvidia-cuda-mps-control -d` for ONE device (a GPU UUID/index, or a MIG-<uuid> so that MPS on MIG
runs one daemon per instance), with its own pipe and log directories (0700). Leaving the block quits the daemon and
waits for it: hung clients are ended with `terminate_client` (then killed), and as a last resort the daemon's own
processes are killed, which `notes` records. The logs stay in `<directory>/log`.

    >>> with MpsDaemon("GPU-5d3c...", directory=run_dir / "mps") as daemon:     # doctest: +SKIP
    ...     subprocess.run(cmd, env={**os.environ, **daemon.client_env()})
    ...     daemon.server_fault()                   # None, or what says the server faulted
    >>> daemon.notes                                # doctest: +SKIP
    []
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from colloc_kit.errors import BadInput, GpuStateError
from colloc_kit.gpu.mps_detect import CONTROL_BINARY, PID_FILE, RunningDaemon, detect_running_daemons
from colloc_kit.gpu.mps_watchdog import reap_exited_daemon_processes, set_subreaper, start_watchdog
from colloc_kit.gpu.pids import alive, kill, read_pid, wait_gone

__all__ = ["MAX_PIPE_DIR_CHARS", "MpsDaemon", "find_control", "private_dir"]

# The daemon listens on Unix sockets in its pipe directory, and a socket path holds at most 107 bytes on Linux;
# this leaves room for the longest name MPS puts there.
MAX_PIPE_DIR_CHARS = 80
_FAULT_LINE = re.compile(r"\bfault|\bfatal", re.IGNORECASE)


class MpsDaemon:
    """A private MPS control daemon for one device; a context manager that always shuts it down.

    `device` goes to CUDA_VISIBLE_DEVICES of the daemon and of every client: a UUID ("GPU-...", "MIG-...") is
    unambiguous for both (NVIDIA's advice); an index works on a one-GPU machine. With `reuse_pipe_dir` the object
    only checks that the daemon already running there answers, and neither starts nor stops it.
    """

    def __init__(self, device: str, directory: Path, control: str | None = None, *, reuse_pipe_dir: str | None = None,
                 start_timeout_s: float = 15.0, command_timeout_s: float = 5.0, quit_timeout_s: float = 15.0,
                 client_timeout_s: float = 5.0):
        self.device = str(device)
        self.directory = Path(directory).absolute()  # the daemon may not run in this working directory
        self.control = find_control(control)
        self.owned = reuse_pipe_dir is None
        self.log_dir = self.directory / "log"
        self.pipe_dir = _pipe_dir_inside(self.directory) if reuse_pipe_dir is None else Path(reuse_pipe_dir)
        self.start_timeout_s = start_timeout_s
        self.command_timeout_s = command_timeout_s
        self.quit_timeout_s = quit_timeout_s
        self.client_timeout_s = client_timeout_s
        self.control_pid: int | None = None
        self.server_pids: set[int] = set()  # every server seen, so that a leftover one can be ended at stop
        self.fault: str | None = None  # the fault seen when the daemon stopped
        self.notes: list[str] = []  # what stop had to force, in words
        self._running = False
        self._silent = False  # a command timed out: the daemon is hung, later commands are not tried
        self._was_subreaper: bool | None = None
        self._watchdog: subprocess.Popen | None = None  # quits the daemon if this process dies without stopping it

    @property
    def _pipes(self) -> Path:
        """The pipe directory, which start() has chosen by the time it is used."""
        assert self.pipe_dir is not None, "start() chooses the pipe directory"
        return self.pipe_dir

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def __enter__(self) -> "MpsDaemon":
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Start the daemon and return once it answers `get_server_list`; on failure leave nothing behind."""
        private_dir(self.log_dir)
        if self.owned:
            if self.pipe_dir is None:
                self.pipe_dir = Path(tempfile.mkdtemp(prefix="colloc-mps-"))  # created 0700
            private_dir(self.pipe_dir)
            self._was_subreaper = set_subreaper(True)
        self._running = True
        try:
            if self.owned:
                self._start_daemon()
            self._wait_until_answering()
            if self.owned:
                self._watchdog = start_watchdog(self.control, self._env(), self._pipes, self.quit_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start_daemon(self) -> None:
        with open(self.log_dir / "control-start.out", "w") as out:  # a file, not a pipe the daemon may keep open
            done = subprocess.run([self.control, "-d"], env=self._env(), stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=self.start_timeout_s)
        if done.returncode != 0:
            raise GpuStateError(f"`{self.control} -d` failed with status {done.returncode}: "
                                f"{self._log_tail('control-start.out')}; the control log is in {self.log_dir}")

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            self._silent = False  # a slow first answer is tried again until the deadline
            self.control_pid = self.control_pid or read_pid(self._pipes / PID_FILE)
            if (self.control_pid or not self.owned) and self.command("get_server_list") is not None:
                return
            time.sleep(0.1)
        raise GpuStateError(
            f"the MPS control daemon for {self.device} did not answer within {self.start_timeout_s:.0f} s "
            f"(pid file {'found' if self.control_pid else 'missing'} in {self.pipe_dir}); "
            f"control log: {self._log_tail('control.log')}")

    def stop(self) -> None:
        """Quit the daemon and wait for it and its servers to exit; force what does not, and say so in `notes`.

        Order: note a server fault; end clients still connected (`terminate_client`, then kill); `quit`; wait;
        kill the daemon's leftover processes. Every wait is bounded; a Ctrl-C or an error during them kills at once.
        """
        if not self._running:
            return
        try:
            self.fault = self.server_fault()
            if self.owned:
                self._shut_down()
        except BaseException as exc:  # Ctrl-C, or an error while it quits: no process of the daemon outlives the kit
            if self.owned:
                self._force("because the shutdown was interrupted" if isinstance(exc, KeyboardInterrupt)
                            else f"because the shutdown failed ({type(exc).__name__}: {exc})")
            raise
        finally:
            self._running = False
            if self._watchdog is not None:  # only now: a kit killed while it shuts the daemon down leaves it the quit
                self._watchdog.kill()
                self._watchdog.wait()
            if self.owned:  # only sockets and the pid file of a daemon that is gone: nothing to keep
                shutil.rmtree(self._pipes, ignore_errors=True)
            if self._was_subreaper is not None:
                reap_exited_daemon_processes([self.control_pid, *self.server_pids])
                set_subreaper(self._was_subreaper)

    def _shut_down(self) -> None:
        self._end_clients()
        if self.control_pid is not None and alive(self.control_pid) and not self._silent:  # a hung one is killed
            self.command("quit")
            wait_gone([self.control_pid], self.quit_timeout_s)
        self.server_pids |= {p.pid for p in self._processes_of_this_daemon() if p.kind == "server"}
        wait_gone(self.server_pids, self.client_timeout_s)
        self._force(f"after they did not exit within {self.quit_timeout_s:.0f} s of `quit`")

    def _force(self, why: str) -> None:
        """Kill the daemon's processes that still run (control, servers), and note it."""
        leftover = [pid for pid in (self.control_pid, *sorted(self.server_pids)) if pid and alive(pid)]
        leftover += [p.pid for p in self._processes_of_this_daemon() if p.pid not in leftover]
        if leftover:
            kill(leftover)
            self.notes.append(f"MPS processes {leftover} were killed {why}; see {self.log_dir}")

    def _end_clients(self) -> None:
        connected = [(server, client) for server in self.servers() for client in self.clients(server) if alive(client)]
        if not connected:
            return
        for server, client in connected:
            self.command(f"terminate_client {server} {client}")
        clients = sorted({client for _, client in connected})
        stuck = wait_gone(clients, self.client_timeout_s)
        self.notes.append(f"MPS clients {clients} were still connected at shutdown and were ended with "
                          f"terminate_client" + (f"; {stuck} did not exit and were killed" if stuck else ""))
        kill(stuck)

    # -- talking to the daemon ---------------------------------------------------------------------------------------
    def command(self, line: str) -> str | None:
        """Send one control command; the daemon's answer, or None where it fails or does not answer in time."""
        if self._silent:
            return None
        try:
            done = subprocess.run([self.control], input=line + "\n", env=self._env(), capture_output=True, text=True,
                                  timeout=self.command_timeout_s)
        except subprocess.TimeoutExpired:
            self._silent = True
            return None
        return done.stdout if done.returncode == 0 else None

    def servers(self) -> list[int]:
        """PIDs of this daemon's MPS servers (a server starts when the first client connects)."""
        pids = _pids(self.command("get_server_list") or "")
        self.server_pids.update(pids)
        return pids

    def clients(self, server: int) -> list[int]:
        """PIDs of the clients connected to MPS server `server`."""
        return _pids(self.command(f"get_client_list {server}") or "")

    def client_env(self) -> dict[str, str]:
        """What a job's environment needs to run as a client of this daemon."""
        env = {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_VISIBLE_DEVICES": self.device}
        return {**env, "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)} if self.owned else env

    def server_fault(self) -> str | None:
        """What says the server faulted (Volta+ MPS: one client's fatal error faults the server and every client).

        Reads `get_server_status` of each server while the daemon runs, and the control and server logs.
        """
        found = []
        if self._running:
            for server in self.servers():
                status = (self.command(f"get_server_status {server}") or "").strip()
                if "FAULT" in status.upper():
                    found.append(f"MPS server {server} status: {status}")
        for name in ("control.log", "server.log"):
            path = self.log_dir / name
            lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
            found += [f"{name}: {line.strip()}" for line in lines if _FAULT_LINE.search(line)]
        return "; ".join(found) or self.fault

    def alive(self) -> bool:
        """Whether the control daemon process still runs."""
        return self.control_pid is not None and alive(self.control_pid)

    def state(self) -> dict[str, Any]:
        """What the daemon was and did, for the run's manifest."""
        return {"device": self.device, "control": self.control, "owned": self.owned, "control_pid": self.control_pid,
                "server_pids": sorted(self.server_pids), "pipe_dir": str(self.pipe_dir), "log_dir": str(self.log_dir),
                "fault": self.fault, "shutdown_notes": list(self.notes)}

    # -- helpers -------------------------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
        return {**env, **self.client_env(), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}

    def _processes_of_this_daemon(self) -> list[RunningDaemon]:
        return [d for d in detect_running_daemons(default_pipe_dir=None) if d.pipe_dir == str(self.pipe_dir)]

    def _log_tail(self, name: str, lines: int = 5) -> str:
        path = self.log_dir / name
        text = path.read_text(errors="replace").strip() if path.is_file() else ""
        return " | ".join(text.splitlines()[-lines:]) or f"({name} is empty)"


def private_dir(path: Path) -> Path:
    """Create a directory only this user may enter (0700), for the daemon's pipes and logs."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def find_control(control: str | None = None) -> str:
    """The control binary: `control` if given, else `nvidia-cuda-mps-control` from PATH; BadInput if missing."""
    path = shutil.which(control or CONTROL_BINARY)
    if path is None:
        where = f"{control!r} is not an executable file" if control else f"{CONTROL_BINARY} is not on the PATH"
        raise BadInput(f"MPS needs its control program, but {where}; install the NVIDIA driver's utilities "
                       f"(e.g. nvidia-compute-utils) or pass control=<path>")
    return path


def _pipe_dir_inside(directory: Path) -> Path | None:
    """`<directory>/pipe`, or None where that path is too long for the daemon's sockets (a temp dir is used)."""
    path = directory / "pipe"
    return path if len(str(path)) <= MAX_PIPE_DIR_CHARS else None


def _pids(text: str) -> list[int]:
    return [int(word) for word in text.split() if word.isdigit()]
