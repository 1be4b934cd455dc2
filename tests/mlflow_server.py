"""A real MLflow tracking server for the tests (`mlflow server`: a sqlite backend and a local artifact folder under
`root`, a free localhost port), stopped with every process it started (`server` asserts none is left)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator
from urllib.request import urlopen

from processes import stop_tree

START_TIMEOUT_S = 180  # a cold start on a busy 2-core machine


@contextlib.contextmanager
def server(root: Path) -> Iterator[str]:
    """`mlflow server` on 127.0.0.1 with its store under `root`; yields its URI; its log is `root/server.log`."""
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no background job runner
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
             "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
        try:
            uri = f"http://127.0.0.1:{port}"
            wait_for(f"{uri}/health", proc, root / "server.log")
            yield uri
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Stop the server and every process under it; assert that none outlives it."""
    left = stop_tree(proc)
    assert not left, f"processes of the MLflow server left behind: {[p.pid for p in left]}"


def wait_for(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert proc.poll() is None, f"mlflow server exited at start:\n{log.read_text()[-3000:]}"
        try:
            with urlopen(url, timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"mlflow server did not answer on {url} in {START_TIMEOUT_S} s"
            time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
