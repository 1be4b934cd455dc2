"""How the spread of a cell's repeats depends on how long each window is: every series of repeats of an experiment
folder (a cell's windows, warm or not) with each window cut to its first L seconds (whole progress intervals from the
common window's start, the jobs' images/s added up), and the coefficient of variation of those rates across the
series, for several L. Where the spread at 6 s matches the spread at 10 s, the window-to-window swing (the host's, for
a loader-bound job) dominates, and a shorter window buys the same precision per repeat for less lane time.

    python benchmarks/seed/lent/window_length.py RUNS/seed-33 > window-length.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

LENGTHS = (3, 4, 6, 8, 10)


def series_windows(experiment: Path) -> dict[tuple[str, str], list[list[list[dict]]]]:
    """{(series, model): one list per complete run of each job's steady, unheld progress intervals}."""
    found: dict[tuple[str, str], list[list[list[dict]]]] = defaultdict(list)
    for manifest_file in sorted(experiment.glob("*/manifest.json")):
        manifest = json.loads(manifest_file.read_text())
        if manifest["status"] != "complete":
            continue
        streams = []
        for events in sorted((manifest_file.parent / "jobs").glob("*.events.jsonl")):
            lines = [json.loads(line) for line in events.read_text().splitlines()]
            streams.append([e for e in lines if e["type"] == "interval" and not e["warmup"] and not e["held"]])
        if all(streams):
            series = manifest["cell_id"].replace(f"-r{manifest['repeat']}-", "-")
            found[(series, manifest["jobs"][0]["spec"]["model"])].append(streams)
    return found


def rate_over(streams: list[list[dict]], seconds: float) -> float | None:
    """The jobs' images/s added up over whole intervals within `seconds` of their common start (None: none)."""
    start = max(s[0]["t"] - s[0]["interval_s"] for s in streams)
    total = 0.0
    for stream in streams:
        inside = [e for e in stream if e["t"] - e["interval_s"] >= start - 1e-6 and e["t"] - start <= seconds + 1e-6]
        if not inside:
            return None
        total += sum(e["interval_images"] for e in inside) / sum(e["interval_s"] for e in inside)
    return total


def table(experiment: Path, least_runs: int = 3) -> str:
    """Markdown: per series of at least `least_runs` runs, its runs, its jobs, the CV (%) across runs at each L."""
    lines = ["| series | model | runs | jobs | " + " | ".join(f"CV at {n} s" for n in LENGTHS) + " |",
             "|---|---|---|---|" + "---|" * len(LENGTHS)]
    for (series, model), runs in series_windows(experiment).items():
        if len(runs) < least_runs:
            continue
        cvs = []
        for seconds in LENGTHS:
            rates = [r for r in (rate_over(streams, seconds) for streams in runs) if r]
            cvs.append(f"{statistics.stdev(rates) / statistics.mean(rates):.1%}" if len(rates) > 1 else "")
        lines.append(f"| {series.rsplit('-', 1)[0]} | {model} | {len(runs)} | {len(runs[0])} | " + " | ".join(cvs)
                     + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", type=Path, help="an experiment folder, e.g. RUNS/seed-33")
    parser.add_argument("--least-runs", type=int, default=3, help="series with fewer runs are left out")
    print(table(parser.parse_args().experiment, parser.parse_args().least_runs))


if __name__ == "__main__":
    main()
