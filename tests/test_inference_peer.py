"""Issue 51: the inference benchmark's plain PyTorch peer (benchmarks/inference/peer_serve.py) and the table that holds
the kit against it (peer_beside.py). The peer imports nothing of the kit, batches as it says, serves Poisson requests
on the CPU writing each request's times, and its training loop starts and stops when told."""

import argparse
import ast
import doctest
import importlib.util
import json
import queue
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.store.rundir import find_runs

FOLDER = Path(__file__).resolve().parents[1] / "benchmarks" / "inference"
PEER = FOLDER / "peer_serve.py"
TINY = ["--model", "smallcnn", "--device", "cpu", "--image-size", "32"]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def peer():
    return load("peer_serve")


def test_the_peer_imports_no_kit_code():
    tree = ast.parse(PEER.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "torch" in imported and not any(name.split(".")[0] == "colloc_kit" for name in imported)


def test_the_peer_modules_examples_hold(peer):
    for module in (peer, load("peer_beside"), load("host_state")):
        failed, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert tried > 0 and failed == 0, module.__name__


def test_a_batch_takes_what_is_queued_up_to_its_size_and_waits_at_most_the_delay(peer):
    requests = queue.Queue()
    for arrival in (0.1, 0.2, 0.3):
        requests.put(arrival)
    t0 = time.perf_counter()
    assert peer.take_batch(requests, 0.0, t0, max_batch=2, max_delay_s=0.0) == [0.0, 0.1]
    first = requests.get()
    assert peer.take_batch(requests, first, t0, max_batch=4, max_delay_s=0.0) == [0.2, 0.3]  # no wait: what is there
    waited = time.perf_counter()
    assert peer.take_batch(requests, 0.0, waited, max_batch=4, max_delay_s=0.05) == [0.0]
    assert 0.04 <= time.perf_counter() - waited < 1.0


@pytest.mark.slow
def test_the_peer_serves_poisson_requests_on_the_cpu_and_writes_each_requests_times(peer, tmp_path):
    out = tmp_path / "serve.json"
    subprocess.run([sys.executable, str(PEER), "serve", *TINY, "--rate", "40", "--seconds", "2", "--seed", "3",
                    "--out", str(out)], check=True, capture_output=True, timeout=120)
    result = json.loads(out.read_text())
    assert result["columns"] == ["arrival_s", "start_s", "done_s", "device_ms", "batch_requests"]
    assert result["device_time"] == "cpu forward wall time"
    rows = result["requests"]
    assert len(rows) + len(result["unanswered"]) == len(peer.poisson_arrivals(40.0, 2.0, 3)) > 40
    assert all(arrival <= start <= done and 0 < device_ms <= 1000 * (done - start) + 1e-6
               for arrival, start, done, device_ms, _ in rows)
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)  # served in order of arrival
    assert 0 < result["p50_ms"] <= result["p99_ms"]
    figures = load("peer_beside").peer_figures({**result, "train_images_per_s": None})
    assert figures["peer_p50_ms"] == pytest.approx(result["p50_ms"], abs=1e-3)  # the kit's rule, the peer's p50
    assert figures["peer_p99_ms_lo"] <= figures["peer_p99_ms"]
    assert figures["peer_queue_p50_ms"] >= 0 and figures["peer_device_p50_ms"] > 0


@pytest.mark.slow
def test_the_peer_training_loop_starts_on_go_and_stops_on_stop(tmp_path):
    out = tmp_path / "train.json"
    proc = subprocess.Popen([sys.executable, str(PEER), "train", *TINY, "--batch-size", "8", "--seconds", "120",
                             "--gate", "--out", str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(1.0)
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    result = json.loads(out.read_text())
    assert result["steps"] > 0 and result["images_per_s"] > 0
    assert 0.9 <= result["window_s"] < 60  # from go to stop, not the 120-s limit


def test_a_cell_answered_short_of_what_arrived_is_not_compared_and_a_short_poisson_draw_is_not_short():
    kit = pd.DataFrame([{"served": "m", "mix": "x", "mode_label": "naive", "repeat": 0, "rate_per_s": 100.0,
                         "requests_per_s": 99.0, "answered_share": 0.99, "latency_p50_ms": 10.0, "latency_p99_ms": 30.0,
                         "train_images_per_s": 90.0}])
    peer = pd.DataFrame([{"served": "m", "mix": "x", "mode_label": "naive", "repeat": 0, "peer_requests_per_s": 50.0,
                          "peer_answered_share": 0.5, "peer_p50_ms": 10.0, "peer_p99_ms": 30.0}])
    beside = load("peer_beside")
    row = beside.kit_vs_peer(kit, peer).iloc[0]
    assert row["answered_short"] and pd.isna(row["within_10pct"])
    # 246 arrivals in a 5-s window offered 55.1/s (issue 51's peer on an H200), all answered: not short
    arrivals = [i * 5.0 / 246 for i in range(246)]
    drawn = beside.peer_figures({"requests": [[a, a, a + 0.005, 4.0, 1] for a in arrivals], "unanswered": [],
                                 "ended_s": 5.1, "window_s": 5.0, "requests_per_s": 49.2,
                                 "device_time": "cuda events", "train_images_per_s": 1.0})
    assert drawn["peer_answered_share"] == 1.0
    kit = kit.assign(rate_per_s=55.1, latency_p50_ms=5.0, latency_p99_ms=5.0)  # as the peer's 5-ms requests
    row = beside.kit_vs_peer(kit, pd.DataFrame([{**peer.iloc[0].to_dict(), **drawn}])).iloc[0]
    assert not row["answered_short"] and row["within_10pct"]


def test_each_setting_gets_its_closed_loop_capacity_and_a_rate_above_it_is_overloaded(monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    serve = JobSpec(model="smallcnn", role="serve", device="cpu", rate_per_s=50.0, max_batch=4, slo="40ms")
    spec = ExperimentSpec(jobs=[serve, JobSpec(model="smallcnn", device="cpu")], name="serve-smallcnn-beside-x")
    closed = inference.capacity_spec(spec)
    assert closed.name == "capacity-smallcnn-beside-x" and closed.jobs[1] == spec.jobs[1]
    assert closed.jobs[0].rate_per_s is None and closed.jobs[0].concurrency == 8
    frontier = pd.DataFrame({"mode_label": ["exclusive", "naive"], "rate_per_s": [50.0, 50.0]})
    capacity = pd.DataFrame({"mode_label": ["naive", "exclusive"], "requests_per_s": [40.0, 200.0]})
    table = inference.with_capacity(frontier, capacity)
    assert list(table["capacity_per_s"]) == [200.0, 40.0] and list(table["overloaded"]) == [False, True]
    launches = pd.DataFrame({"mode_label": ["naive", "naive", "naive", "exclusive"],
                             "requests_per_s": [40.0, 70.0, 60.0, 200.0]})  # --repeats 3: a row per launch
    assert list(inference.with_capacity(frontier, launches)["capacity_per_s"]) == [200.0, 60.0]


@pytest.mark.slow
def test_a_peer_cell_serves_beside_a_training_loop_started_and_stopped_with_it(tmp_path):
    serve = JobSpec(model="smallcnn", role="serve", device="cpu", image_size=32, rate_per_s=20.0, seconds=1.5,
                    max_batch=2, max_delay_ms=1.0)
    train = JobSpec(model="smallcnn", device="cpu", image_size=32, batch_size=8)
    result = load("peer_beside").peer_cell(serve, train, 1, ModeSpec("naive"), tmp_path)
    assert result["requests"] and result["max_batch"] == 2 and result["rate"] == 20.0
    assert result["train_images_per_s"] > 0
    trained = json.loads((tmp_path / "train-0.json").read_text())
    assert trained["window_s"] < 30  # stopped when the server was done, not at its own limit


def test_the_kits_cost_takes_the_ratio_pair_by_pair_gives_its_ci_and_a_resumed_folder_reads_the_pairs(
        monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    calls = []

    def requests(ms: float) -> list[list[float]]:  # 2 s of requests of `ms` each
        return [[i * 0.05, i * 0.05 + ms / 1000] for i in range(40)]

    class PlainLoop:  # one process per model for all its windows
        def __init__(self, served, tiny):
            calls.append(f"plain {served['model']}")

        def __enter__(self):
            return self

        def __exit__(self, *_):
            calls.append("closed")

    def paired_windows(served, args, runs, plain):  # the host slows in pairs 1 and 3
        calls.append(f"{args.cost_rounds} pairs")
        return [{"first": first, "plain": requests(plain_ms), "kit": requests(1.1 * plain_ms)}
                for first, plain_ms in zip(["plain", "kit"] * 2, [10.0, 20.0, 10.0, 20.0])]

    monkeypatch.setattr(inference, "PlainLoop", PlainLoop)
    monkeypatch.setattr(inference, "paired_windows", paired_windows)
    args = argparse.Namespace(cost_rounds=4, tiny=True, cost_seconds=1.0)
    cost = inference.kit_cost(args, tmp_path, tmp_path / "runs").iloc[0]
    assert calls == ["plain smallcnn", "4 pairs", "closed"]
    assert cost["rounds"] == 4 and cost["kit_over_plain"] == pytest.approx(0.10) and cost["ci95"] == pytest.approx(0)
    assert cost["plain_p50_ms"] == pytest.approx(15.0)
    rounds = pd.read_csv(tmp_path / "plain_vs_kit_rounds.csv")
    assert list(rounds["first"]) == ["plain", "kit"] * 2 and list(rounds["round"]) == [0, 1, 2, 3]
    # within the host's state: the slow pairs (20 and 22 ms) are slow, the others fast, each compared with its like
    states = pd.read_csv(tmp_path / "plain_vs_kit_states.csv").set_index("state")
    assert states.loc["fast", "pairs"] == 2 and states.loc["slow", "pairs"] == 2
    assert states.loc["fast", "plain_p50_ms"] == pytest.approx(10.0)
    assert states.loc["slow", "kit_p50_ms"] == pytest.approx(22.0)
    assert states.loc["fast", "kit_over_plain"] == pytest.approx(0.10) and states.loc["fast", "plain_share"] == 0.5
    assert len(json.loads((tmp_path / "plain_vs_kit_requests.json").read_text())) == 4
    # the folder resumed: the pairs that ran are read, not run again; a longer window runs them anew
    calls.clear()
    again = inference.kit_cost(args, tmp_path, tmp_path / "runs").iloc[0]
    assert calls == [] and again.equals(cost)  # no process started
    inference.kit_cost(argparse.Namespace(cost_rounds=4, tiny=True, cost_seconds=2.0), tmp_path, tmp_path / "runs")
    assert calls == ["plain smallcnn", "4 pairs", "closed"]


@pytest.mark.slow
def test_the_kits_windows_are_one_held_launch_with_the_plain_loops_between_them_the_first_alternating(
        monkeypatch, tmp_path):
    """The cost's pairs on a real tiny server: the kit's windows are one launch (one process, primed once) and the
    plain loop's windows run between them while it is held, in the order plain, kit, kit, plain, plain, kit, ...;
    `--cost-kit no-monitor` runs the kit's arm without its monitor."""
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")

    class Plain:  # the plain loop's windows, when they ran
        ran = []

        def window(self, seconds):
            self.ran.append(time.time())
            time.sleep(0.2)
            return [[0.0, 0.001]]

    args = argparse.Namespace(cost_rounds=4, tiny=True, cost_seconds=0.5, cost_kit="no-monitor")
    pairs = inference.paired_windows(inference.TINY["smallcnn"], args, tmp_path / "runs", Plain())
    manifests = sorted((run.read_manifest() for run in find_runs(tmp_path / "runs")), key=lambda m: m.started_at)
    assert [m.warm.window for m in manifests] == [0, 1, 2, 3] and len({m.warm.launch for m in manifests}) == 1
    assert not any(m.monitor.enabled for m in manifests), "--cost-kit no-monitor: the kit's arm without its monitor"
    order = sorted([(t, "plain") for t in Plain.ran] + [(m.started_at, "kit") for m in manifests])
    assert [arm for _, arm in order] == ["plain", "kit", "kit", "plain", "plain", "kit", "kit", "plain"]
    ends = [m.ended_at for m in manifests]
    assert all(not start < ended < start + 0.2 for start in Plain.ran for ended in ends), "never beside each other"
    assert [pair["first"] for pair in pairs] == ["plain", "kit", "plain", "kit"]
    assert all(len(pair["kit"]) >= 2 and pair["plain"] == [[0.0, 0.001]] for pair in pairs)
    assert all(0 < device_ms <= 1000 * (answered - arrival) for pair in pairs for arrival, answered, device_ms in
               pair["kit"]), "each of the kit's requests with its device time, within its latency"
    alone = load("cost_parts").kit_parts(tmp_path / "runs" / "cost-smallcnn")  # the kit's arm read back from its runs
    assert alone["windows"] == 4 and alone["requests"] == sum(len(pair["kit"]) for pair in pairs)
    assert 0 < alone["host_p50_ms"] < alone["latency_p50_ms"] and alone["host_share"] < 1


@pytest.mark.slow
def test_the_plain_loop_serves_window_after_window_from_one_process(monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    with inference.PlainLoop(inference.TINY["smallcnn"], tiny=True) as plain:
        first, second = plain.window(0.6), plain.window(0.6)
        process = plain.process
    assert process.returncode == 0  # ended when closed
    for window in (first, second):  # (on a loaded 2-core machine a tiny request took up to 0.13 s)
        assert len(window) >= 2 and all(start < answered for start, answered, _ in window)
        assert all(earlier[1] <= later[0] for earlier, later in zip(window, window[1:])), "one at a time"
        assert all(0 < device_ms <= 1000 * (answered - start) + 1e-6 for start, answered, device_ms in window)
        assert window[-1][0] - window[0][0] < 0.6 <= window[-1][1] - window[0][0] + 0.01, "the window's seconds"
    assert second[0][0] > first[-1][1]  # one after the other, the same process


def test_the_kits_cost_split_into_device_and_host_time_sees_the_host_part_whatever_the_gpus_state():
    cost_parts = load("cost_parts")

    def requests(device_ms: float, host_ms: float) -> list[list[float]]:  # 40 requests, 10 ms apart
        return [[i / 100, i / 100 + (device_ms + host_ms) / 1000, device_ms] for i in range(40)]

    # the GPU's time moves from pair to pair (4-8 ms) and between the arms; the kit adds 0.1-0.3 ms of host time
    pairs = [{"model": "m", "plain": requests(4.0 + r % 2 * 4.0, 0.5), "kit": requests(4.4 + r % 3, 0.6 + r % 3 / 10)}
             for r in range(12)]
    row = cost_parts.parts_table(pairs).iloc[0]
    assert row["pairs"] == 12 and row["plain_host_p50_ms"] == pytest.approx(0.5)
    assert row["kit_host_p50_ms"] == pytest.approx(0.7)
    assert row["plain_latency_p50_ms"] == pytest.approx(4.5)  # the lower of the two states' (nearest rank)
    assert row["kit_added_share"] == pytest.approx(0.2 / 4.5)
    assert row["ci_low"] < row["kit_added_share"] < row["ci_high"] and row["ci_high"] - row["ci_low"] < 0.1
    # pairs without device times (runs made before they were recorded) are left out, not read as zero
    untimed = [{"model": "m", "plain": [[0.0, 0.005]], "kit": [[0.0, 0.006, None]]}]
    assert cost_parts.parts_table(untimed).iloc[0]["pairs"] == 0


def test_the_cost_within_the_host_state_compares_like_with_like_and_says_how_often_each_arm_was_slow():
    host_state = load("host_state")

    def requests(*ms: float) -> list[list[float]]:  # a second of requests at each latency in turn
        return [[second + i * 0.02, second + i * 0.02 + latency / 1000] for second, latency in enumerate(ms)
                for i in range(50)]

    # the kit 2 % slower in each state, but slow twice as often: its plain p50 ratio would say +50 %
    rounds = [{"model": "m", "round": r, "plain": requests(4.0, 4.0, 4.0, 8.0), "kit": requests(4.08, 8.16, 8.16, 4.08)}
              for r in range(3)]
    table = host_state.state_table(rounds).set_index("state")
    assert table.loc["fast", "kit_over_plain"] == pytest.approx(0.02)
    assert table.loc["slow", "kit_over_plain"] == pytest.approx(0.02)
    assert table.loc["fast", "plain_share"] == 0.75 and table.loc["fast", "kit_share"] == 0.5
    assert table.loc["fast", "fast_below_ms"] == pytest.approx(5.6)
    assert table.loc["fast", "ci_low"] == pytest.approx(0.02) == table.loc["fast", "ci_high"]  # alike pairs: no spread
    # pooled: a pair whose kit met the slow state and whose plain loop did not still counts; the CI from the pairs
    mixed = [{"model": "m", "round": r, "plain": requests(4.0 + r / 10), "kit": requests(4.2, 8.4 + r / 10)}
             for r in range(6)]
    table = host_state.state_table(mixed).set_index("state")
    assert table.loc["slow", "pairs"] == 6 and table.loc["fast", "kit_p50_ms"] == pytest.approx(4.2)
    assert table.loc["fast", "plain_p50_ms"] == pytest.approx(4.25)  # 4.0-4.5 ms over the six pairs: their median
    low, point, high = table.loc["fast", ["ci_low", "kit_over_plain", "ci_high"]]
    assert low < high and low <= point <= high and high - low > 0.03
    # a state one arm never met is not compared: no ratio
    only_fast = [{"model": "m", "round": 0, "plain": requests(4.0, 4.0), "kit": requests(4.0, 4.0)}]
    slow = host_state.state_table(only_fast).set_index("state").loc["slow"]
    assert slow["pairs"] == 0 and pd.isna(slow["kit_over_plain"]) and pd.isna(slow["ci_high"])


def test_a_failed_peer_cell_is_a_row_that_says_why_and_the_table_still_holds_the_others(monkeypatch, tmp_path):
    beside = load("peer_beside")

    def peer_cell(serve, train, copies, mode, folder, placement):
        if mode.name == "mps":
            raise RuntimeError("the peer did not get ready")
        return {"requests": [[0.0, 0.0, 0.01, 5.0, 1]], "unanswered": [], "ended_s": 1.0, "window_s": 1.0,
                "requests_per_s": 1.0, "device_time": "cpu forward wall time", "train_images_per_s": 10.0}

    monkeypatch.setattr(beside, "peer_cell", peer_cell)
    serve = JobSpec(model="smallcnn", role="serve", rate_per_s=1.0)  # on a GPU (the spec is only read here)
    spec = ExperimentSpec(jobs=[serve, JobSpec(model="smallcnn")], modes=[ModeSpec("naive"), ModeSpec("mps")])
    kit = pd.DataFrame({"served": "smallcnn", "mix": "smallcnn x1", "mode_label": ["naive", "mps"], "repeat": 0,
                        "copies": 1, "rate_per_s": 1.0, "requests_per_s": 1.0, "answered_share": 1.0,
                        "latency_p50_ms": 10.0, "latency_p99_ms": 10.0, "train_images_per_s": 10.0})

    def peer_rows(spec: ExperimentSpec) -> pd.DataFrame:
        return pd.DataFrame([beside.peer_setting(spec, index, tmp_path) for index in range(len(spec.modes))])

    table = beside.kit_vs_peer(kit, peer_rows(spec)).set_index("mode_label")
    assert table.loc["naive", "within_10pct"] and pd.isna(table.loc["naive", "peer_error"])
    assert "did not get ready" in table.loc["mps", "peer_error"] and pd.isna(table.loc["mps", "peer_p50_ms"])
    # resumed: the cell that ran is read from its folder, the failed one runs again; another rate runs anew
    ran = []

    def counted(serve, train, copies, mode, *rest):
        ran.append(mode.label)
        return peer_cell(serve, train, copies, mode, *rest)

    monkeypatch.setattr(beside, "peer_cell", counted)
    again = peer_rows(spec).set_index("mode_label")
    assert ran == ["mps"] and again.loc["naive", "peer_p50_ms"] == table.loc["naive", "peer_p50_ms"]
    peer_rows(ExperimentSpec(jobs=[replace(serve, rate_per_s=2.0), JobSpec(model="smallcnn")], modes=spec.modes))
    assert ran == ["mps", "naive", "mps"]


def test_each_launchs_kit_and_peer_cells_run_together_the_first_alternating(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    ran, made = [], set()  # made: (mode, launch) of the kit's launches in the folder

    def kit_setting(spec, mode, runs):
        missing = [launch for launch in range(spec.repeats) if (mode.label, launch) not in made]
        ran.extend(("kit", mode.label, launch) for launch in missing)
        made.update((mode.label, launch) for launch in missing)
        return pd.DataFrame([{"mode_label": mode.label, "repeat": launch} for launch in range(spec.repeats)])

    def peer_setting(spec, index, folder, launch):
        ran.append(("peer", spec.modes[index].label, launch))
        return {"mode_label": spec.modes[index].label, "repeat": launch}

    class Plan:  # the kit's plan: the launches not yet in the folder
        @staticmethod
        def of(spec, folder):
            todo = [launch for launch in range(spec.repeats) if (spec.modes[0].label, launch) not in made]
            return argparse.Namespace(todo=[argparse.Namespace(repeat=launch) for launch in todo])

    monkeypatch.setattr(inference, "kit_setting", kit_setting)
    monkeypatch.setattr(inference, "peer_setting", peer_setting)
    monkeypatch.setattr(inference, "Plan", Plan)
    spec = ExperimentSpec(jobs=[JobSpec(model="smallcnn", role="serve", rate_per_s=1.0), JobSpec(model="smallcnn")],
                          modes=[ModeSpec("exclusive"), ModeSpec("naive"), ModeSpec("mps")])
    kit, peer = inference.paired_settings(spec, tmp_path / "runs", tmp_path / "peer")
    assert ran == [("kit", "exclusive", 0), ("peer", "exclusive", 0), ("peer", "naive", 0), ("kit", "naive", 0),
                   ("kit", "mps", 0), ("peer", "mps", 0)]
    assert list(kit["mode_label"]) == ["exclusive", "naive", "mps"]
    ran.clear()
    made.clear()
    kit, peer = inference.paired_settings(spec, tmp_path / "runs", None)  # --no-peer: the kit's cells only
    assert ran == [("kit", "exclusive", 0), ("kit", "naive", 0), ("kit", "mps", 0)] and peer == []
    ran.clear()
    # two launches: the first ones read, with no peer beside them (none ran then); a peer beside each second one,
    # the order going on alternating from pair to pair
    kit, peer = inference.paired_settings(replace(spec, repeats=2), tmp_path / "runs", tmp_path / "peer")
    assert ran == [("peer", "exclusive", 1), ("kit", "exclusive", 1), ("kit", "naive", 1), ("peer", "naive", 1),
                   ("peer", "mps", 1), ("kit", "mps", 1)]
    assert list(kit["repeat"]) == [0, 1] * 3 and [row["repeat"] for row in peer] == [1, 1, 1]


@pytest.mark.slow
def test_a_tiny_run_starts_each_settings_kit_and_peer_cells_together_the_first_alternating_and_resumes_them(
        monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    argv = ["--tiny", "--rate", "smallcnn=20", "--seconds", "1", "--no-capacity", "--out", str(tmp_path)]
    assert inference.main(argv) == 0
    table = pd.read_csv(tmp_path / "kit_vs_peer.csv")
    assert list(table["mode_label"]) == ["exclusive", "naive"] and list(table["first"]) == ["kit", "peer"]
    started = sorted((row[column], who, row["mode_label"]) for _, row in table.iterrows()
                     for who, column in (("kit", "started_at"), ("peer", "peer_started_at")))
    assert [cell for _, *cell in started] == [["kit", "exclusive"], ["peer", "exclusive"], ["peer", "naive"],
                                              ["kit", "naive"]]  # each setting's two cells next to each other
    assert "with each order" in (tmp_path / "summary.md").read_text()
    # resumed: every cell that ran is read, none run again
    cells = sorted(path.name for path in (tmp_path / "runs").glob("*/2*"))
    assert inference.main(argv) == 0
    assert sorted(path.name for path in (tmp_path / "runs").glob("*/2*")) == cells
    again = pd.read_csv(tmp_path / "kit_vs_peer.csv")
    assert again[["started_at", "peer_started_at", "first"]].equals(table[["started_at", "peer_started_at", "first"]])


def test_a_call_may_run_some_mixes_at_rates_an_earlier_call_measured_and_only_the_first_mix_gets_the_extras(
        monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    parser = argparse.ArgumentParser()
    args = argparse.Namespace(rate=["resnet50=61.5"], served=["resnet50"], tiny=False, cost_only=False,
                              mixes=["resnet50x2", "vit_b_16x1"], seconds=3.0, repeats=3)
    rates = inference.given_rates(parser, args)
    assert rates == {"resnet50": 61.5}
    labels = {mix: [m.label for m in spec.modes] for _, mix, spec in inference.experiments(args, rates)}
    assert list(labels) == ["resnet50x2", "vit_b_16x1"]
    assert all("exclusive" not in modes and len(modes) == 3 for modes in labels.values())
    rate = {spec.jobs[0].rate_per_s for _, _, spec in inference.experiments(args, rates)}
    assert rate == {61.5}
    assert {spec.repeats for _, _, spec in inference.experiments(args, rates)} == {3}  # --repeats: launches a setting
    first = inference.experiments(argparse.Namespace(**{**vars(args), "mixes": None}), rates)[0][2]
    assert first.modes[0].label == "exclusive" and len(first.modes) == 7


@pytest.mark.parametrize("given, says", [(["resnet50=fast"], "give MODEL=REQUESTS_PER_S"),
                                         (["resnet50=61"], "vit_b_16 missing")])
def test_a_rate_given_wrongly_exits_2_saying_what_to_give(monkeypatch, capsys, given, says):
    monkeypatch.syspath_prepend(str(FOLDER))
    inference = load("inference")
    with pytest.raises(SystemExit) as exited:
        inference.main(["--rate", *given, "--out", "/nonexistent/never-made"])
    assert exited.value.code == 2 and says in capsys.readouterr().err


def test_the_peer_cells_read_as_one_more_launch_of_the_kits_give_the_shipped_table():
    """The results README's counts of peer cells inside the kit's range of one more launch come from this table."""
    module = load("peer_against_launches")
    failed, tried = doctest.testmod(module)
    assert tried > 0 and failed == 0
    table = module.table()
    shipped = pd.read_csv(module.RESULTS / "peer-vs-launches.csv")
    pd.testing.assert_frame_equal(table.reset_index(drop=True), shipped, check_dtype=False)
    assert len(table) == 33 and int(table["peer_p99_inside"].sum()) == 25 and int(table["peer_p50_inside"].sum()) == 28
    inside = table["next_p99_ms_lo"].le(table["peer_p99_ms"]) & table["peer_p99_ms"].le(table["next_p99_ms_hi"])
    assert inside.tolist() == table["peer_p99_inside"].tolist()  # the flag is the range's own test


def test_the_kit_against_the_peer_per_setting_pools_each_shipped_pair_once():
    """The results README's per-setting table (`peer-by-mode.csv`) comes from the shipped pairs, each counted once:
    launch 0 of the settings beside one ResNet-50 trainer is in both its first folder and the later one that read it."""
    module = load("peer_by_mode")
    pairs = module.pairs()
    assert len(pairs) == 54 and not pairs.duplicated(["served", "mix", "mode_label", "repeat"]).any()
    beside_one = pairs[pairs["mix"] == "resnet50 x1"]
    assert sorted(beside_one["repeat"].unique()) == [0, 3, 4] and len(beside_one) == 2 * 7 * 3
    rows = module.per_setting()
    shipped = pd.read_csv(module.RESULTS / "peer-by-mode.csv")
    pd.testing.assert_frame_equal(rows, shipped, check_dtype=False)
    overall = rows.iloc[-1]
    assert overall["mode_label"] == "all settings" and overall["pairs"] == 54 == rows.iloc[:-1]["pairs"].sum()
    ratio = (pairs["latency_p50_ms"] / pairs["peer_p50_ms"]).prod() ** (1 / len(pairs)) - 1
    assert overall["p50_kit_over_peer"] == pytest.approx(ratio)  # the geometric mean of the pairs' ratios


def test_the_later_launches_read_against_the_shipped_sets_range_give_the_shipped_table():
    """The results README's counts of later launches inside the set's range of one more launch come from this."""
    module = load("later_launches")
    rows = module.table()
    pd.testing.assert_frame_equal(rows, pd.read_csv(module.RESULTS / "later-launches.csv"), check_dtype=False)
    assert len(rows) == 28 and set(rows["repeat"]) == {3, 4}  # the set's own launches 0-2 are not read again
    inside = rows["next_p99_ms_lo"].le(rows["p99_ms"]) & rows["p99_ms"].le(rows["next_p99_ms_hi"])
    assert inside.tolist() == rows["inside"].tolist() and int(inside.sum()) == 22
    assert rows["same_verdict"].tolist() == (rows["p99_ms"].le(25) == rows["set_p99_ms"].le(25)).tolist()
