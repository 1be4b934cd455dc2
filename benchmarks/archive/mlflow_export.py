"""How long `colloc-kit export mlflow` takes for the shipped H100 reference set, into a fresh local MLflow server
(sqlite backend, a local artifact folder) on this machine: the set's tables (`h100-80gb`), and its raw run folders
(benchmarks/results/h100/seed/seed-runs.tgz: with the interval histories, GPU series and artifacts); each exported
twice (the second adds nothing).

    python benchmarks/archive/mlflow_export.py                        # both, printed
    python benchmarks/archive/mlflow_export.py --out mlflow-export.json --only tables

The server runs as the tests start it (tests/mlflow_server.py), on the same machine as the export.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "benchmarks" / "results" / "h100" / "seed" / "seed-runs.tgz"
sys.path.insert(0, str(ROOT / "tests"))
from mlflow_server import server  # noqa: E402 - the tests' server, started the same way


def timed_export(source: str, uri: str, name: str) -> dict:
    """One `colloc-kit export mlflow` as a process: its wall time and its summary line."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "colloc_kit.cli", "export", "mlflow", source, "--tracking-uri", uri,
                           "--experiment-name", name], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"export of {source} failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"source": source, "seconds": round(seconds, 1), "said": done.stdout.strip()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("tables", "raw"), help="measure one source only")
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    figures = []
    with tempfile.TemporaryDirectory() as tmp, server(Path(tmp)) as uri:
        sources = []
        if args.only != "raw":
            sources.append(("h100-80gb", "tables"))
        if args.only != "tables":
            with tarfile.open(RAW) as archive:
                archive.extractall(tmp, filter="data")
            sources.append((str(Path(tmp) / "runs"), "raw"))
        for source, name in sources:
            for attempt in ("first", "again"):
                figure = {"kind": name, "attempt": attempt, **timed_export(source, uri, f"h100-80gb-{name}")}
                print(f"{name:6s} {attempt:5s} {figure['seconds']:6.1f} s  {figure['said']}")
                figures.append(figure)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
