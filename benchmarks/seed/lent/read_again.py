"""How long a process takes to read the seed study's folder, the first time and again (the runs read before are
kept while their files stay as they were: `analysis.results.read_run`), the two in one command. The seed study reads
its folder again at each of its specs; on four H200s its resumed calls spent up to 171 s before their first cell.

    python3 benchmarks/seed/lent/read_again.py benchmarks/results/h200/issue55/s20-seed33-fp32-x4-runs.tar.xz --out DIR
"""

from __future__ import annotations

import argparse
import os
import tarfile
import tempfile
import time
from pathlib import Path

import colloc_kit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packed", type=Path, help="a .tgz of a run folder (runs/<experiment>/...)")
    parser.add_argument("--out", type=Path, required=True, help="where read-again.md is written")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(args.packed) as packed:
            packed.extractall(folder, filter="data")
        seconds = []
        for _ in range(2):
            started = time.perf_counter()
            runs = len(colloc_kit.load(folder).runs)
            seconds.append(time.perf_counter() - started)
    args.out.mkdir(parents=True, exist_ok=True)
    text = (f"# Reading a folder again\n\n`python3 benchmarks/seed/lent/read_again.py {args.packed}` on "
            f"{os.cpu_count()} cores: {runs} runs read in {seconds[0]:.2f} s the first time, {seconds[1]:.2f} s again "
            f"({seconds[0] / seconds[1]:.1f}x).\n")
    (args.out / "read-again.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
