"""A job out of host memory where its need could not be predicted before it ran (issue 53): recorded as out of memory,
saying what to lower, whether torch's allocator failed or the kernel's out-of-memory killer ended it."""

import json
import signal

import pytest
from processes import KitWatch, ended, kit

import colloc_kit
from colloc_kit import supervise
from colloc_kit.modes import Slot
from colloc_kit.pipeline.launcher import LaunchItem, Wave
from colloc_kit.spec import JobSpec

OOM_ADVICE = "lower --batch-size or --workers, or run fewer copies at once"


@pytest.mark.slow
def test_a_job_out_of_host_memory_mid_run_is_recorded_as_out_of_memory_saying_what_to_do(tmp_path):
    """FAULT INJECTION (test only): at step 3 the job's address space is capped just above what it holds
    (RLIMIT_AS) and a batch's worth is allocated for real, so torch's CPU allocator fails as on a host whose memory
    is used up. The job is out_of_memory, saying what to lower (it was `other`, torch's raw RuntimeError); its
    neighbour completes; nothing is left; the folder reads back."""
    job = {"model": "smallcnn", "device": "cpu", "image_size": 16, "steps": 6, "warmup_steps": 1, "batch_size": 8,
           "synthetic_samples": 64, "workers": 0}
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"jobs": [job, {**job, "fail_at_step": 3, "fail_kind": "host_memory"}],
                                "monitor": False}))
    proc = kit("run", spec, "--quiet", "--time-limit", "120", "--out", tmp_path / "out")
    code, printed, _ = ended(proc, KitWatch(proc.pid), timeout=150)
    assert code == 1
    jobs = colloc_kit.load(tmp_path / "out").jobs.set_index("group")
    assert jobs.loc[0, "status"] == "complete"
    assert jobs.loc[1, "status"] == "failed" and jobs.loc[1, "error_kind"] == "out_of_memory"
    assert jobs.loc[1, "error"].startswith(f"out of host memory: {OOM_ADVICE}"), jobs.loc[1, "error"]
    assert "can't allocate memory" in jobs.loc[1, "error"]  # torch's own words kept, after ours


@pytest.mark.slow
def test_a_job_the_oom_killer_ends_is_recorded_as_out_of_memory_saying_what_to_do(tmp_path, monkeypatch):
    """The kernel's out-of-memory killer ends a job with SIGKILL: no error event, only the signal. SIMULATED (test
    only): the job SIGKILLs itself (`crash` fault) while the machine's count of out-of-memory kills (/proc/vmstat's
    oom_kill) rises by one. It was recorded as `killed` by SIGKILL; it is out_of_memory, saying what to lower."""
    counts = iter(range(1000))
    monkeypatch.setattr(supervise, "oom_kills", lambda: next(counts))
    job = JobSpec(model="smallcnn", device="cpu", image_size=16, steps=6, warmup_steps=1, batch_size=8,
                  synthetic_samples=64, workers=0, fail_at_step=3, fail_kind="crash")
    wave = Wave([LaunchItem("j0", job, Slot(env={}, label="cpu"))], jobs_dir=tmp_path / "jobs", time_limit_s=120)
    (outcome,) = wave.run()
    assert outcome.status == "failed" and outcome.exit_code == -signal.SIGKILL
    assert outcome.error_kind == "out_of_memory", outcome.error
    assert "out-of-memory killer" in outcome.error and OOM_ADVICE in outcome.error


@pytest.mark.slow
def test_a_sigkill_while_no_oom_kill_was_counted_stays_a_kill(tmp_path, monkeypatch):
    """The same SIGKILL with the machine's out-of-memory count unchanged is not called out of memory."""
    monkeypatch.setattr(supervise, "oom_kills", lambda: 7)
    job = JobSpec(model="smallcnn", device="cpu", image_size=16, steps=6, warmup_steps=1, batch_size=8,
                  synthetic_samples=64, workers=0, fail_at_step=3, fail_kind="crash")
    wave = Wave([LaunchItem("j0", job, Slot(env={}, label="cpu"))], jobs_dir=tmp_path / "jobs", time_limit_s=120)
    (outcome,) = wave.run()
    assert outcome.error_kind == "killed" and outcome.error.startswith("worker killed by SIGKILL")
