"""The kit's later launches read against the shipped set (issue 51): does a launch made after the set, on another
day, fall inside the range the set's three launches give one more launch (`serve_advise.by_setting`), and does its
p99 keep the set's verdict for the SLO (25 ms)?

    python3 benchmarks/inference/later_launches.py    # writes results/h200/later-launches.csv, prints the counts

It reads the shipped set `h200-inference` and the launches r3 and r4 of the 14 settings beside one ResNet-50 trainer
(`results/h200/pairs-r50x1/`, `pairs-vitx1/`: session 33, each with a peer cell beside it). Nothing runs on a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from colloc_kit import reference
from colloc_kit.predict import serve_advise

RESULTS = Path(__file__).resolve().parent / "results" / "h200"
LATER = ("pairs-r50x1", "pairs-vitx1")
KEYS = ["served", "mix", "mode_label"]


def table() -> pd.DataFrame:
    """A row per later launch: its p99, the set's p99 and range of one more launch for its setting, whether the
    launch lies inside the range and whether it is within the SLO as the set's p99 is (`same_verdict`)."""
    settings = serve_advise.by_setting(serve_advise.run_rows(reference.load("h200-inference"))).set_index(KEYS)
    later = pd.concat([pd.read_csv(RESULTS / folder / "frontier.csv") for folder in LATER], ignore_index=True)
    later = later[later["repeat"] >= 3]  # launches 0-2 are the set's own
    rows = []
    for launch in later.itertuples():
        shipped = settings.loc[(launch.served, launch.mix, launch.mode_label)]
        rows.append({"served": launch.served, "mix": launch.mix, "mode_label": launch.mode_label,
                     "repeat": launch.repeat, "p99_ms": launch.latency_p99_ms,
                     "set_p99_ms": shipped["latency_p99_ms"], "next_p99_ms_lo": shipped["next_p99_ms_lo"],
                     "next_p99_ms_hi": shipped["next_p99_ms_hi"],
                     "inside": shipped["next_p99_ms_lo"] <= launch.latency_p99_ms <= shipped["next_p99_ms_hi"],
                     "same_verdict": (launch.latency_p99_ms <= launch.slo_ms) == (shipped["latency_p99_ms"]
                                                                                <= launch.slo_ms)})
    return pd.DataFrame(rows)


def main() -> int:
    rows = table()
    rows.to_csv(RESULTS / "later-launches.csv", index=False)
    below = rows["p99_ms"] < rows["next_p99_ms_lo"]
    print(f"{len(rows)} later launches: inside the set's range of one more launch {int(rows['inside'].sum())} "
          f"({int(below.sum())} below it, {int((~rows['inside'] & ~below).sum())} above), the set's SLO verdict kept "
          f"in {int(rows['same_verdict'].sum())}; {RESULTS / 'later-launches.csv'}")
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(rows[~rows["inside"] | ~rows["same_verdict"]].round(1).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
