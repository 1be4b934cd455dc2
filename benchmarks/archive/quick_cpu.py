"""How long the README's quick CPU command takes (issue 14: well under a minute on a 2-core machine; 9 s measured).

    python benchmarks/archive/quick_cpu.py            # prints the seconds and whether the 60 s target was met
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

TARGET_S = 60.0
COMMAND = ["run", "--mode", "naive", "--model", "smallcnn", "--copies", "2", "--device", "cpu", "--epochs", "1"]


def main() -> int:
    with tempfile.TemporaryDirectory() as out:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "colloc_kit.cli", *COMMAND, "--out", out], capture_output=True)
        seconds = time.monotonic() - started
    print(f"colloc-kit {' '.join(COMMAND)}: exit {done.returncode} in {seconds:.1f} s (target {TARGET_S:.0f} s: "
          f"{'met' if seconds < TARGET_S else 'MISSED'})")
    return 0 if done.returncode == 0 and seconds < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
