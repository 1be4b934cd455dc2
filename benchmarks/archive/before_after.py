"""One spec run by two copies of the kit, before and after a change, on one machine: each (mode, copies) with its
aggregate images/s and gain over the lone run, with their 95 % CIs side by side, and whether the two agree.

The copies take turns (before, after, before, after, ...: `--rounds`), each round a fresh experiment folder with its
own lone run, so a drift of the machine shows up in both. `--kit LABEL=DIR` names a folder that holds a
`colloc_kit/` (e.g. `git archive 278fe60 colloc_kit | tar -x -C /tmp/before`); `.` is this checkout.

    python3 benchmarks/archive/before_after.py run SPEC.yaml --kit before=/tmp/before --kit after=. --out OUT \
        --rounds 2 -- --gpus 0,1
    python3 benchmarks/archive/before_after.py compare OUT > OUT/compare.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

import colloc_kit
from colloc_kit.analysis import figures
from colloc_kit.analysis import summaries as analysis


def run(spec: str, kits: dict[str, str], out: Path, rounds: int, extra: list[str]) -> None:
    """Each kit runs `spec` once per round, in turn; wall time per run into OUT/walls.json."""
    walls = []
    for round_ in range(rounds):
        for label, kit in kits.items():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(kit).resolve()),
                                                                os.environ.get("PYTHONPATH", "")])}
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "colloc_kit.cli", "run", spec, "--name", f"r{round_}",
                                   "--out", str(out / label), "--quiet", *extra], env=env, capture_output=True,
                                  text=True)
            walls.append({"kit": label, "round": round_, "wall_s": round(time.monotonic() - started, 1),
                          "exit": done.returncode})
            print(json.dumps(walls[-1]), done.stderr[-2000:] if done.returncode else "", flush=True)
            (out / "walls.json").write_text(json.dumps(walls, indent=1))


def compare(out: Path) -> None:
    """Markdown: per kit and (mode, copies), aggregate images/s and gain (each run's over its round's lone run):
    the mean +- 95 % CI over the rounds (one round: its own CI), each round's value, and whether the two kits'
    intervals overlap."""
    rows = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        runs = analysis.run_summary(colloc_kit.load(folder))
        for (mode, copies), group in runs.groupby(["mode_label", "copies"], sort=False):
            rows.append({"kit": folder.name, "mode": mode, "copies": int(copies),
                         "images/s": _over_rounds(group, "aggregate_images_per_s"),
                         "gain": _over_rounds(group, "normalized_throughput"),
                         "rounds": ", ".join(f"{v:,.0f}" for v in group["aggregate_images_per_s"])})
    table = pd.DataFrame(rows)
    kits = list(dict.fromkeys(table["kit"]))
    print(f"| mode | copies | {' | '.join(f'{k} images/s (rounds) | {k} gain' for k in kits)} | agree |")
    print("|---|---|" + "---|---|" * len(kits) + "---|")
    for (mode, copies), group in table.groupby(["mode", "copies"], sort=False):
        by_kit = {row["kit"]: row for _, row in group.iterrows()}
        cells = [f"{_pm(by_kit[k]['images/s'])} ({by_kit[k]['rounds']}) | {_pm(by_kit[k]['gain'])}"
                 if k in by_kit else "- | -" for k in kits]
        print(f"| {mode} | {copies} | {' | '.join(cells)} | {_agree([by_kit[k] for k in kits if k in by_kit])} |")
    walls = json.loads((out / "walls.json").read_text())
    print("\n" + "; ".join(f"{w['kit']} round {w['round']}: {w['wall_s']} s (exit {w['exit']})" for w in walls))


def _over_rounds(runs: pd.DataFrame, column: str) -> tuple[float, float]:
    """Mean and 95 % CI over the rounds; with one round, that run's own CI (over its measurement window)."""
    return figures.ci95(runs[column]) if len(runs) > 1 else (runs[column].iloc[0], runs[f"{column}_ci"].iloc[0])


def _pm(pair: tuple[float, float]) -> str:
    mean, ci = pair
    return "-" if mean != mean else f"{mean:,.2f} ± {ci:,.2f}" if mean < 100 else f"{mean:,.0f} ± {ci:,.0f}"


def _agree(rows: list[pd.Series]) -> str:
    """yes where every kit's images/s interval overlaps every other's (and their gains' too, where there is one)."""
    if len(rows) < 2:
        return "-"
    for key in ("images/s", "gain"):
        spans = [(m - c, m + c) for m, c in (row[key] for row in rows) if m == m and c == c]
        if len(spans) == len(rows) and max(lo for lo, _ in spans) > min(hi for _, hi in spans):
            return "no"
    return "yes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("spec")
    go.add_argument("--kit", action="append", required=True, help="LABEL=DIR holding colloc_kit/")
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("--rounds", type=int, default=2)
    go.add_argument("extra", nargs="*", help="after --: flags for `colloc-kit run` (e.g. --gpus 0,1)")
    show = sub.add_parser("compare")
    show.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        run(args.spec, dict(k.split("=", 1) for k in args.kit), args.out, args.rounds, args.extra)
    else:
        compare(args.out)


if __name__ == "__main__":
    main()
