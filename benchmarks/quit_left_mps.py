"""Quit the MPS daemons a lent machine's earlier call left behind (a call killed at its limit leaves its daemon
running in a session of its own), each found by the kit's own detection with its pipe directory read from the
process; a daemon that does not quit within 10 s is killed. Prints one line per daemon.

    python3 benchmarks/quit_left_mps.py      # in a lent-call script, before and after the kit runs
"""

from __future__ import annotations

import os
import subprocess

from colloc_kit.gpu.mps_detect import detect_running_daemons
from colloc_kit.gpu.pids import kill, wait_gone


def main() -> None:
    """Quit every running MPS control daemon, then kill what is left of any daemon."""
    for daemon in [d for d in detect_running_daemons() if d.kind == "control"]:
        try:  # session 24 saw a quit hang
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, timeout=20, capture_output=True,
                           env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": daemon.pipe_dir or "/tmp/nvidia-mps"})
        except subprocess.TimeoutExpired:
            pass
        print(f"a left MPS daemon {daemon.pid} ({daemon.pipe_dir}):",
              "quit" if not wait_gone([daemon.pid], 10) else "killed")
    kill([d.pid for d in detect_running_daemons()])


if __name__ == "__main__":
    main()
