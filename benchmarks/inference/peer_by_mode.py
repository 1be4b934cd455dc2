"""The kit against the plain PyTorch peer per sharing setting, over every pair on the H200 (issue 51): each pair is a
kit launch and a peer cell run one right after the other, the first alternating (`inference.paired_settings`); a
setting's pairs are pooled over the served models, the mixes and the launches (`peer_beside.by_mode`).

    python3 benchmarks/inference/peer_by_mode.py     # writes results/h200/peer-by-mode.csv, prints the table

It reads the `kit_vs_peer.csv` of the folders in `PAIRED`: each setting's first launch beside its peer cell (sessions
23 and 24) and the launches paired with a peer cell since (session 33). The peer cells that ran apart from the kit's
launches (`peer-vit-2/`: the kit's launches read, not run beside it) are not pairs and are left out here
(`peer_against_launches.py` reads them as one more launch). Nothing runs on a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from peer_beside import by_mode  # a sibling: on sys.path when this file runs as a script

RESULTS = Path(__file__).resolve().parent / "results" / "h200"
PAIRED = ("p12-r50", "p12-vit", "rest-vit", "rest-r50",  # launch r0 of every setting beside its peer cell
          "pairs-r50x1", "pairs-vitx1", "pairs-r50rest", "pairs-vitrest")  # launch r3 beside its own (session 33)


def pairs() -> pd.DataFrame:
    """Every pair of the folders in `PAIRED` that came back (a row each: `kit_vs_peer`'s columns, `folder`); the
    first four ran before pairs had a launch (`repeat`), and hold launch 0."""
    tables = [pd.read_csv(RESULTS / folder / "kit_vs_peer.csv").assign(folder=folder)
              for folder in PAIRED if (RESULTS / folder / "kit_vs_peer.csv").exists()]
    table = pd.concat(tables, ignore_index=True)
    return table.assign(repeat=table.reindex(columns=["repeat"])["repeat"].fillna(0).astype(int))


def main() -> int:
    table = by_mode(pairs())
    table.to_csv(RESULTS / "peer-by-mode.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table.to_string(index=False, float_format="%.3f"))
    print(f"{int(table['agrees'].sum())} of {len(table)} settings agree within 10 % on p50 and p99; "
          f"{RESULTS / 'peer-by-mode.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
