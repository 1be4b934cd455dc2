"""The kit against the plain PyTorch peer per sharing setting, over every pair on the H200 (issue 51): each pair is a
kit launch and a peer cell run one right after the other, the first alternating (`inference.paired_settings`); a
setting's pairs are pooled over the served models, the mixes and the launches (`peer_beside.by_mode`).

    python3 benchmarks/inference/peer_by_mode.py     # writes results/h200/peer-by-mode.csv, prints it

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
PAIRED = ("pairs-r50x1", "pairs-vitx1",  # beside one ResNet-50 trainer: launches r0 (read), r3 and r4 (session 33)
          "p12-r50", "p12-vit", "rest-vit", "rest-r50")  # launch r0 of every setting beside its peer cell


def pairs() -> pd.DataFrame:
    """Every pair of the folders in `PAIRED`, once (a row each: `kit_vs_peer`'s columns, `folder`: the first that
    holds it): the last four ran before pairs had a launch (`repeat`) and hold launch 0, which the first two read
    again for the settings they share."""
    table = pd.concat([pd.read_csv(RESULTS / folder / "kit_vs_peer.csv").assign(folder=folder) for folder in PAIRED],
                      ignore_index=True)
    table = table.assign(repeat=table["repeat"].fillna(0).astype(int))
    return table.drop_duplicates(["served", "mix", "mode_label", "repeat"])


def per_setting() -> pd.DataFrame:
    """`by_mode` of every pair (`pairs`): a row per setting, and a last row over all of them (`all settings`)."""
    paired = pairs()
    return pd.concat([by_mode(paired), by_mode(paired.assign(mode_label="all settings"))], ignore_index=True)


def main() -> int:
    rows = per_setting()
    rows.to_csv(RESULTS / "peer-by-mode.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(rows.to_string(index=False, float_format="%.3f"))
    settings, overall = rows.iloc[:-1], rows.iloc[-1]
    inside = "inside" if overall["agrees"] else "not inside"
    print(f"{int(settings['agrees'].sum())} of {len(settings)} settings' CIs inside 10 % on p50 and p99; over all "
          f"{overall['pairs']} pairs: {inside}; {RESULTS / 'peer-by-mode.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
