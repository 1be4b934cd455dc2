"""The plain PyTorch peer's cell of each setting read as one more launch of the kit's (issue 51): does the peer's
p99 fall inside the range the kit's three launches give one more launch (`serve_advise.by_setting`), and its p50
inside the kit's launches' p50 range widened alike? A peer inside them measures what the kit measures, within the
spread a p99 has from launch to launch; one outside is a difference the launches do not explain.

    python3 benchmarks/inference/peer_against_launches.py     # writes results/h200/peer-vs-launches.csv, prints counts

It reads the shipped set `h200-inference` (each setting's three launches) and the peer's cells: beside each
setting's first launch (`results/h200/{p12-r50,p12-vit,rest-vit,rest-r50}/kit_vs_peer.csv`) and, for ViT-B/16 beside
one ResNet-50 trainer, a second peer launch (`peer-vit-2/`); nothing runs on a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from colloc_kit import reference
from colloc_kit.predict import serve_advise
from colloc_kit.stats import geometric_ci95

RESULTS = Path(__file__).resolve().parent / "results" / "h200"
PEER_FOLDERS = ("p12-r50", "p12-vit", "rest-vit", "rest-r50",  # the peer cells beside each setting's first launch
                "peer-vit-2")  # a second peer launch of ViT-B/16 beside one ResNet-50 trainer's 7 settings (session 26)
KEYS = ["served", "mix", "mode_label"]


def p50_range(p50s: pd.Series) -> tuple[float, float]:
    """The range one more launch's p50 falls in (95 %), from the launches' p50s, as `by_setting` gives the p99's.

    >>> [round(v, 2) for v in p50_range(pd.Series([10.0, 10.5, 11.0]))]
    [8.28, 13.3]
    """
    return geometric_ci95(p50s)[3:]


def table() -> pd.DataFrame:
    """A row per peer cell (`peer_launch`: its folder): the kit's p99 and the range of one more launch, the peer's
    p99 and whether it lies inside; the same for the p50 (`p50_range` of the kit's launches' p50s)."""
    runs = serve_advise.run_rows(reference.load("h200-inference"))
    settings = serve_advise.by_setting(runs).set_index(KEYS)
    p50s = runs.groupby(KEYS)["latency_p50_ms"].apply(p50_range)
    peer = pd.concat([pd.read_csv(RESULTS / folder / "kit_vs_peer.csv").drop_duplicates(KEYS)
                      .assign(peer_launch=folder)  # a kit of several launches lists its one peer cell with each
                      for folder in PEER_FOLDERS])
    rows = []
    for cell in peer.itertuples():
        key = (cell.served, cell.mix, cell.mode_label)
        kit = settings.loc[key]
        low50, high50 = p50s.loc[key]
        rows.append({"served": cell.served, "mix": cell.mix, "mode_label": cell.mode_label,
                     "peer_launch": cell.peer_launch,
                     "kit_p99_ms": kit["latency_p99_ms"], "next_p99_ms_lo": kit["next_p99_ms_lo"],
                     "next_p99_ms_hi": kit["next_p99_ms_hi"], "peer_p99_ms": cell.peer_p99_ms,
                     "peer_p99_inside": kit["next_p99_ms_lo"] <= cell.peer_p99_ms <= kit["next_p99_ms_hi"],
                     "kit_p50_ms": kit["latency_p50_ms"], "next_p50_ms_lo": low50, "next_p50_ms_hi": high50,
                     "peer_p50_ms": cell.peer_p50_ms, "peer_p50_inside": low50 <= cell.peer_p50_ms <= high50})
    return pd.DataFrame(rows)


def main() -> int:
    rows = table()
    rows.to_csv(RESULTS / "peer-vs-launches.csv", index=False)
    both = rows["peer_p99_inside"] & rows["peer_p50_inside"]
    print(f"{len(rows)} peer cells: the peer's p99 inside the kit's range of one more launch in "
          f"{int(rows['peer_p99_inside'].sum())}, its p50 in {int(rows['peer_p50_inside'].sum())}, both in "
          f"{int(both.sum())}; {RESULTS / 'peer-vs-launches.csv'}")
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(rows[~both].round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
