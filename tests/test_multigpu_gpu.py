"""Cells over two real GPUs: each cell on its own GPU (jobs there, the monitor there, a private MPS daemon), both
GPUs busy at once, and no MPS process left. Needs a machine with at least 2 GPUs:

    PYTHONPATH=$PWD python -m pytest -q -m gpu tests/test_multigpu_gpu.py        # on a 2-GPU machine
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

import colloc_kit
from colloc_kit import machine
from colloc_kit.monitor import read_samples
from colloc_kit.store.rundir import find_runs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("nvidia-cuda-mps-control") is None,
                                                  reason="nvidia-cuda-mps-control is not on the PATH")]
JOB = {"model": "resnet18", "batch_size": 64, "amp": "bf16", "steps": 80, "warmup_steps": 20}


def pgrep() -> str:
    return subprocess.run(["pgrep", "-a", "nvidia-cuda-mps"], capture_output=True, text=True).stdout.strip()


def test_cells_over_two_gpus_each_own_their_gpu(tmp_path):
    gpus, reason = machine.gpu_list()
    if len(gpus) < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {len(gpus)} ({reason or 'one GPU'})")
    assert pgrep() == "", "an MPS daemon was running before the test; stop it first"
    results = colloc_kit.run([JOB], mode=["naive", "mps"], copies=[1, 2], out=tmp_path, progress=False, gpus=[0, 1])
    runs = results.runs
    assert set(runs["status"]) == {"complete"} and set(runs["gpu"]) == {0, 1}
    assert pgrep() == "", "MPS processes were left running"
    uuids = {g["index"]: g["uuid"] for g in gpus}
    spans = []
    for run in find_runs(tmp_path):
        manifest, samples = run.read_manifest(), read_samples(run.path)
        gpu = manifest.gpu
        assert manifest.machine.gpu_uuid == uuids[gpu]
        assert samples.info["gpu"] == gpu and len(samples.gpu) > 0  # the monitor sampled the cell's GPU
        if manifest.mode.name == "naive":  # the jobs ran on that GPU: NVML lists them there
            seen = set(samples.process.dropna(subset=["job"])["job"])
            assert seen == {j.job for j in manifest.jobs}
        else:
            daemon = manifest.mode_state["daemon"]
            assert daemon["pipe_dir"].startswith(str(run.path)) or "colloc-mps-" in daemon["pipe_dir"]
        assert manifest.host_cpu.cpu_s > 0
        spans.append((gpu, manifest.started_at, manifest.ended_at))
    assert any(g0 != g1 and s0 < e1 and s1 < e0 for g0, s0, e0 in spans for g1, s1, e1 in spans), \
        "both GPUs ran cells at the same time"
