#!/usr/bin/env python3
"""A stand-in for `nvidia-cuda-mps-control`, so the MPS mode's lifecycle is tested on machines without a GPU.

Like the real program: `-d` starts a daemon (the caller returns at once) that writes
$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid and $CUDA_MPS_LOG_DIRECTORY/control.log and listens on the
socket $CUDA_MPS_PIPE_DIRECTORY/control; without `-d` it reads commands on stdin, sends each to the daemon and prints
the answers. Its processes are named like the real ones (`pgrep nvidia-cuda-mps` finds them); a server process
starts when the first client connects. Commands: get_server_list, get_client_list SERVER, get_server_status SERVER,
terminate_client SERVER CLIENT, start_server -uid UID, quit; and, for tests only, `fake_connect PID` (the process PID
connects as a client).

Switches (environment of `-d`): FAKE_MPS_FAIL_START=1 (`-d` fails), FAKE_MPS_SILENT=1 (the daemon never answers),
FAKE_MPS_HANG_ON_QUIT=1 (after `quit` it neither exits nor obeys SIGTERM), FAKE_MPS_FAULT=1 (the server faults when
a client connects, as Volta+ MPS does on a client's fatal error).

    $ CUDA_MPS_PIPE_DIRECTORY=/tmp/p CUDA_MPS_LOG_DIRECTORY=/tmp/l python tests/fake_mps_control.py -d
    $ echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=/tmp/p python tests/fake_mps_control.py
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime

PIPE_DIR = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
LOG_DIR = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")
SOCKET = os.path.join(PIPE_DIR, "control")
PID_FILE = os.path.join(PIPE_DIR, "nvidia-cuda-mps-control.pid")


def flag(name: str) -> bool:
    return os.environ.get(name) == "1"


def set_process_name(name: str) -> None:
    """Name this process as the kernel shows it (15 characters), as `pgrep nvidia-cuda-mps` matches the real ones."""
    ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


def log(who: str, message: str) -> None:
    with open(os.path.join(LOG_DIR, f"{who}.log"), "a") as f:
        f.write(f"[{datetime.now():%Y-%m-%d %H:%M:%S.%f} {who.capitalize()} {os.getpid()}] {message}\n")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def client() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(SOCKET)
                conn.sendall(line.encode())
                conn.shutdown(socket.SHUT_WR)
                answer = b"".join(iter(functools.partial(conn.recv, 4096), b""))
        except OSError:
            print("Cannot find MPS control daemon process", file=sys.stderr)
            return 1
        sys.stdout.write(answer.decode())
    return 0


def start_daemon() -> int:
    if flag("FAKE_MPS_FAIL_START"):
        print("MPS control daemon failed to start: fake failure (FAKE_MPS_FAIL_START=1)", file=sys.stderr)
        return 1
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return 0  # like the real -d: the caller returns while the daemon starts
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    Daemon().serve()
    os._exit(0)


class Daemon:
    def __init__(self) -> None:
        set_process_name("nvidia-cuda-mps-control")
        self.server: subprocess.Popen | None = None
        self.clients: list[int] = []

    def serve(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(SOCKET)
        except OSError as exc:
            log("control", f"Failed to start control daemon: {exc}")
            return
        listener.listen()
        with open(PID_FILE, "w") as f:
            f.write(f"{os.getpid()}\n")
        log("control", f"Starting control daemon using socket {SOCKET}")
        while True:
            conn, _ = listener.accept()
            with conn:
                line = b"".join(iter(functools.partial(conn.recv, 4096), b"")).decode().strip()
                if flag("FAKE_MPS_SILENT"):
                    time.sleep(3600)
                log("control", f"Accepting connection... {line}")
                answer = self.answer(line.split())
                conn.sendall(answer.encode())
            if line == "quit":
                self.quit()

    def answer(self, words: list[str]) -> str:
        cmd, args = (words[0], words[1:]) if words else ("", [])
        server = self.server.pid if self.server and self.server.poll() is None else None
        if cmd == "get_server_list":
            return f"{server}\n" if server else ""
        if cmd == "get_client_list" and args and args[0] == str(server):
            return "".join(f"{c}\n" for c in self.clients if alive(c))
        if cmd == "get_server_status" and args and args[0] == str(server):
            return "FAULT\n" if flag("FAKE_MPS_FAULT") else "ACTIVE\n"
        if cmd == "start_server":
            self.start_server()
            return ""
        if cmd == "fake_connect" and args:
            self.start_server()
            self.clients.append(int(args[0]))
            if flag("FAKE_MPS_FAULT"):
                log("control", f"Server {self.server.pid} exited with status FAULT: a client hit a fatal GPU exception")
            return ""
        if cmd == "terminate_client" and len(args) == 2 and args[0] == str(server):
            os.kill(int(args[1]), signal.SIGTERM)
            log("control", f"Terminating client {args[1]} of server {server}")
            return ""
        if cmd == "quit":
            return ""
        return f"Unrecognized command {' '.join(words)!r}\n"

    def start_server(self) -> None:
        if self.server is None or self.server.poll() is not None:
            self.server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--server"])
            log("control", f"NEW SERVER {self.server.pid}: Ready")

    def quit(self) -> None:
        if flag("FAKE_MPS_HANG_ON_QUIT"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(3600)
        while any(alive(c) for c in self.clients):  # the server waits for its clients, as the real one does
            time.sleep(0.05)
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            log("control", f"Server {self.server.pid} exited with status {self.server.wait()}")
        log("control", "Exit")
        os.unlink(SOCKET)
        os.unlink(PID_FILE)
        os._exit(0)


def server() -> None:
    set_process_name("nvidia-cuda-mps-server")
    log("server", "Server started")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    if sys.argv[1:] == ["-d"]:
        sys.exit(start_daemon())
    if sys.argv[1:] == ["--server"]:
        server()
    sys.exit(client())
