"""Loading runs: windows, aggregates and GPU summaries computed from hand-made event logs and samples."""

import json

import pandas as pd
import pytest

import colloc_kit
from colloc_kit.cli.main import main
from colloc_kit.errors import BadInput
from colloc_kit.paths import shown
from colloc_kit.store.manifest import Manifest
from colloc_kit.store.rundir import RunDir


def _interval(job, t, images, warmup=False, interval_s=1.0):
    return {"type": "interval", "job": job, "t": t, "interval_s": interval_s, "interval_images": images,
            "warmup": warmup, "step": 0, "images": 0}


def _write_run(tmp_path, jobs, sequential=False, status="complete"):
    run = RunDir.create(tmp_path, "exp", "naive-x2-r0")
    spec = {"model": "resnet18", "dataset": "synthetic", "batch_size": 100, "amp": "bf16", "device": "cuda"}
    entries = []
    for job_id, stream in jobs.items():
        run.jobs_dir.mkdir(exist_ok=True)
        run.events_path(job_id).write_text("".join(json.dumps(e) + "\n" for e in stream))
        entries.append({"job": job_id, "group": 0, "spec": spec,
                        "slot": {"label": "s", "info": {"thread_percentage": 50}},
                        "outcome": None})
    run.write_manifest(Manifest.from_dict({"run_id": run.run_id, "experiment": "exp", "status": status,
                                           "mode": {"name": "naive", "label": "naive"}, "copies": len(jobs),
                                           "repeat": 0, "sequential": sequential, "jobs": entries}))
    return run


def _stream(job, start, n, rate):
    """A warm-up interval at `start`, then n one-second steady intervals at `rate` images/s, then the end event."""
    events = [{"type": "start", "job": job, "t": start}, _interval(job, start + 1, 10, warmup=True)]
    events += [_interval(job, start + 1 + k, rate) for k in range(1, n + 1)]
    events.append({"type": "end", "job": job, "t": start + 1 + n, "status": "complete", "images_per_s": rate,
                   "steady_s": float(n), "steady_images": rate * n, "peak_allocated_mb": 900.0})
    return events


def test_overlap_window_counts_only_the_common_steady_time(tmp_path):
    # job a is steady over [101, 111], job b over [104, 108]: the common window is [104, 108]
    _write_run(tmp_path, {"a": _stream("a", 100, 10, 1000), "b": _stream("b", 103, 4, 400)})
    res = colloc_kit.load(tmp_path)
    rows = res.jobs.set_index("job")
    assert rows.loc["a", "images_per_s_overlap"] == pytest.approx(1000)
    assert rows.loc["b", "images_per_s_overlap"] == pytest.approx(400)
    assert res.runs.iloc[0]["aggregate_images_per_s"] == pytest.approx(1400)
    assert res.runs.iloc[0]["throughput_window"] == "overlap"
    assert rows.loc["a", "step_time_s"] == pytest.approx(0.1)  # batch 100 at 1000 images/s
    assert rows.loc["a", "slot_thread_percentage"] == 50 and rows.loc["a", "peak_memory_mb"] == 900


def test_jobs_that_never_overlap_fall_back_to_their_own_rates(tmp_path):
    _write_run(tmp_path, {"a": _stream("a", 100, 3, 1000), "b": _stream("b", 200, 3, 500)})
    run = colloc_kit.load(tmp_path).runs.iloc[0]
    assert run["throughput_window"] == "own" and run["aggregate_images_per_s"] == pytest.approx(1500)


def test_sequential_aggregate_is_steady_images_over_steady_time(tmp_path):
    _write_run(tmp_path, {"a": _stream("a", 100, 2, 1000), "b": _stream("b", 200, 6, 600)}, sequential=True)
    run = colloc_kit.load(tmp_path).runs.iloc[0]
    assert run["throughput_window"] == "sequential"
    assert run["aggregate_images_per_s"] == pytest.approx((2000 + 3600) / 8)


def test_gpu_samples_are_summarised_over_the_window_and_joined(tmp_path):
    run = _write_run(tmp_path, {"a": _stream("a", 100, 10, 1000), "b": _stream("b", 103, 4, 400)})
    t = [100 + 0.5 * k for k in range(30)]
    samples = pd.DataFrame({"t": t, "sm_util_pct": [90.0 if 104 <= x <= 108 else 10.0 for x in t],
                            "power_w": [500.0] * len(t), "energy_mj": [500_000.0 * (x - 100) for x in t]})
    run.monitor_dir.mkdir()
    samples.to_parquet(run.monitor_dir / "samples_gpu.parquet")
    res = colloc_kit.load(tmp_path)
    row = res.jobs.set_index("job").loc["a"]
    assert row["sm_util_pct_mean"] == pytest.approx(90.0)
    assert row["energy_j"] == pytest.approx(500 * 4)  # 500 W over the 4 s common window
    assert row["energy_per_image_j"] == pytest.approx(2000 / (1400 * 4))
    assert len(res.samples) == 30 and set(res.samples["run_id"]) == {run.run_id}


def test_a_run_whose_process_died_reads_as_interrupted(tmp_path):
    stream = _stream("a", 100, 3, 1000)[:-1]  # no end event
    _write_run(tmp_path, {"a": stream}, status="running")
    res = colloc_kit.load(tmp_path)
    assert res.runs.iloc[0]["status"] == "interrupted"
    assert res.jobs.iloc[0]["status"] == "interrupted"


def test_loading_a_path_that_does_not_exist_says_so(tmp_path):
    """Before: `colloc_kit.load()` of a path that does not exist returned 0 runs without a word (issue 53)."""
    with pytest.raises(BadInput, match=f"{tmp_path / 'rnus'} does not exist; give a run directory or a folder of runs"):
        colloc_kit.load(tmp_path / "rnus")
    with pytest.raises(BadInput, match="rnus does not exist"):
        colloc_kit.load([tmp_path, tmp_path / "rnus"])
    assert colloc_kit.load(tmp_path).runs.empty  # an existing folder without runs: no runs, as before


def test_a_finished_run_whose_event_log_is_gone_is_named_as_read_in_part(tmp_path, capsys):
    """Before: `show` printed "complete" for a run whose event logs were gone, without a word (issue 53)."""
    run = _write_run(tmp_path, {"a": _stream("a", 100, 3, 1000), "b": _stream("b", 100, 3, 1000)})
    run.events_path("b").unlink()
    res = colloc_kit.load(tmp_path)
    assert res.skipped() == [f"the run {shown(run.path)} is read in part: b.events.jsonl is missing: b's figures "
                             "cannot be computed"]
    assert "b.events.jsonl is missing" in res.runs.iloc[0]["problems"]
    assert main(["show", str(tmp_path)]) == 1
    assert "b.events.jsonl is missing" in capsys.readouterr().err
    run.events_path("b").write_text("".join(json.dumps(e) + "\n" for e in _stream("b", 100, 3, 1000)))
    assert colloc_kit.load(tmp_path).skipped() == []  # both logs there: nothing to name
