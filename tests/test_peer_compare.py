"""The peer benchmark's table (benchmarks/peer/peer_train_py.py compare): a lone job's repeats give the kit's difference
from train.py with a 95 % CI, so a +-3 % target can be judged against what repeats of either program do."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

PEER = Path(__file__).resolve().parents[1] / "benchmarks" / "peer" / "peer_train_py.py"


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("peer_train_py", PEER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(folder: Path, rates: dict[tuple[str, str], list[float]]) -> Path:
    """results.jsonl as `run` writes it: one lone row per (workload, program) repeat."""
    rows = [{"program": program, "placement": "unpinned", "workload": workload, "mode": "naive", "copies": 1,
             "repeat": i + 1, "aggregate_images_per_s": rate, "job_rates": json.dumps([rate])}
            for (workload, program), values in rates.items() for i, rate in enumerate(values)]
    (folder / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def test_a_clear_difference_has_a_ci_that_excludes_zero_and_a_noisy_one_does_not(peer, tmp_path):
    rows = peer.compare(_results(tmp_path, {
        ("r26-fp32", "kit"): [900, 905, 895, 910, 890], ("r26-fp32", "train.py"): [1000, 1005, 995, 1010, 990],
        ("r50-in64", "kit"): [1000, 1300, 1100, 1400, 900], ("r50-in64", "train.py"): [1100, 950, 1350, 1000, 1250]}))
    kit = rows[rows["program"] == "kit"].set_index("workload")
    clear, noisy = kit.loc["r26-fp32"], kit.loc["r50-in64"]
    assert clear["vs_train_py_pct"] == pytest.approx(-10.0)
    assert clear["vs_train_py_ci_low_pct"] <= -10.0 <= clear["vs_train_py_ci_high_pct"] < 0
    assert noisy["vs_train_py_ci_low_pct"] < -3 and noisy["vs_train_py_ci_high_pct"] > 3  # +-3 % not shown
    table = (tmp_path / "table.md").read_text()
    assert "-10.0 % (95 % CI" in table and "nan" not in table.lower()


def test_too_few_repeats_give_the_difference_without_a_ci(peer, tmp_path):
    rows = peer.compare(_results(tmp_path, {("r26-bf16", "kit"): [1400, 1500], ("r26-bf16", "train.py"): [1450]}))
    kit = rows[rows["program"] == "kit"].iloc[0]
    assert kit["vs_train_py_pct"] == pytest.approx(100 * (1450 / 1450 - 1))
    assert math.isnan(kit["vs_train_py_ci_low_pct"])
    assert "| +0.0 % |" in (tmp_path / "table.md").read_text()


def test_a_window_past_the_copys_log_lines_says_what_to_do(peer):
    """train.py pauses at each epoch's end; a window that runs into it is an error naming the remedy."""
    stamps = [(0.0, 0), (1.0, 128), (2.0, 256)]
    assert peer._rate(stamps, (0.5, 1.5)) == pytest.approx(128.0)
    with pytest.raises(RuntimeError, match="more images, or a shorter --seconds"):
        peer._rate(stamps, (0.5, 5.0))


def test_a_host_matched_lone_row_gives_its_host_part_and_each_collocated_cell_its_gpu_part(peer, tmp_path):
    assert peer.plan(["mps"], [3, 7], 1, True) == [("naive", 1, 1, 4), ("naive", 1, 1, 12), ("naive", 1, 1, 28),
                                                   ("mps", 3, 1, 4), ("mps", 7, 1, 4)]
    cell = {"program": "train.py", "placement": "unpinned", "workload": "r26-fp32", "job_rates": "[]", "repeat": 1}
    rows = [{**cell, "mode": "naive", "copies": 1, "aggregate_images_per_s": 1000.0},  # an older row: no workers
            {**cell, "mode": "naive", "copies": 1, "workers": 12, "aggregate_images_per_s": 1500.0},
            {**cell, "mode": "mps", "copies": 3, "workers": 4, "aggregate_images_per_s": 1800.0}]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    table = peer.compare(tmp_path).set_index(["mode", "copies", "workers"])
    assert table.loc[("naive", 1, 12), "gain"] == pytest.approx(1.5)  # the host's part
    assert table.loc[("mps", 3, 4), "gpu_part"] == pytest.approx(1.2) and table.loc[("mps", 3, 4), "gain"] == 1.8
    assert "naive x1, 12 workers (host-matched)" in (tmp_path / "table.md").read_text()
