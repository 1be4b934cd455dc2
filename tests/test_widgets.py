"""The notebooks' widget panel builds, runs through its Run callback, and redraws its figure."""

import pandas as pd
import pytest

from colloc_kit.errors import BadInput
from colloc_kit.results import Results
from colloc_kit.spec import JobSpec
from colloc_kit.widgets import ExperimentPanel

TINY_CPU_JOB = {"device": "cpu", "dataset": "synthetic", "image_size": 32, "synthetic_samples": 64, "warmup_steps": 2,
                "workers": 0}


def fake_results(jobs: pd.DataFrame) -> Results:
    """What colloc_kit.run returns, for jobs that trained together at the rates given (no common-window detail)."""
    first = jobs.iloc[0]
    runs = pd.DataFrame([{**{k: first[k] for k in ("run_id", "experiment", "mode", "mode_label", "copies", "repeat")},
                          "n_jobs": len(jobs), "n_complete": len(jobs), "aggregate_images_per_s": jobs["images_per_s"].sum(),
                          "aggregate_images_per_s_ci": 1.0, "throughput_window": "overlap", "flags": None,
                          "bound_by": "cpu"}])
    return Results(jobs=jobs, epochs=pd.DataFrame(), runs=runs)


def fake_run(calls):
    def run(jobs, mode, copies, out, name, time_limit_s, progress):
        calls.append({"jobs": jobs, "mode": mode, "copies": copies, "time_limit_s": time_limit_s})
        rows = [{"run_id": f"r{copies}", "experiment": name, "mode": mode.name, "mode_label": mode.label,
                 "copies": copies, "repeat": 0, "sequential": False, "alone": copies == 1, "job": f"j{i}", "slot_label": "s", "model": jobs[0]["model"],
                 "dataset": "synthetic", "batch_size": jobs[0]["batch_size"], "amp": "off", "device": "cpu",
                 "status": "complete", "images_per_s": 100.0 * (1 + 0.5 * (copies - 1)) / copies,
                 "epoch_time_s": None, "step_time_s": 0.1, "peak_memory_mb": 10.0} for i in range(copies)]
        return fake_results(pd.DataFrame(rows))
    return run


def test_panel_runs_each_chosen_copy_count_and_redraws_the_figure():
    calls = []
    panel = ExperimentPanel(models=["smallcnn", "resnet18"], modes=["naive", {"name": "mps", "thread_percentage": 50}],
                            copies=(1, 2), job=dict(TINY_CPU_JOB), run_fn=fake_run(calls))
    panel.models.value = ("resnet18",)
    panel.batch_size.value = 64
    panel.steps.value = 12
    panel.copies.value = (1, 2, 4)
    panel.mode.value = panel.mode.options[1][1]
    panel.time_limit.value = 30
    panel.button.click()
    assert [c["copies"] for c in calls] == [1, 2, 4]
    assert calls[0]["jobs"] == [{**TINY_CPU_JOB, "model": "resnet18", "batch_size": 64, "steps": 12}]
    assert calls[0]["mode"].options == {"thread_percentage": 50} and calls[0]["time_limit_s"] == 30
    assert panel.progress.value == 3 and not panel.button.disabled
    (trace,) = panel.figure.data
    assert list(trace.x) == [1, 2, 4]
    assert list(trace.y) == pytest.approx([1.0, 1.5, 2.5])
    assert "done: 7 jobs" in panel.status.value


def test_the_panels_steps_replace_a_seconds_budget_of_the_notebooks_job():
    """The GPU profiles give jobs a seconds budget; the panel's steps replace it instead of making two budgets."""
    calls = []
    panel = ExperimentPanel(models=["resnet18"], copies=(2,), job={"amp": "bf16", "seconds": 8, "warmup_steps": 10},
                            run_fn=fake_run(calls))
    panel.steps.value = 40
    panel.button.click()
    assert calls[0]["jobs"] == [{"amp": "bf16", "warmup_steps": 10, "model": "resnet18", "batch_size": 32, "steps": 40}]
    JobSpec.from_mapping(calls[0]["jobs"][0])  # one budget: a valid job


def test_bad_input_shows_in_the_status_line_and_the_panel_stays_usable():
    def refuse(*args, **kwargs):
        raise BadInput("unknown model 'resnet9'; valid models: resnet18, ...")

    panel = ExperimentPanel(models=["resnet9"], job=dict(TINY_CPU_JOB), run_fn=refuse)
    panel.run()
    assert "not run" in panel.status.value and "resnet9" in panel.status.value
    assert not panel.button.disabled and len(panel.jobs) == 0


@pytest.mark.slow
def test_panel_drives_a_real_tiny_cpu_run(tmp_path):
    panel = ExperimentPanel(models=["smallcnn"], modes=["naive"], copies=(1,), batch_sizes=(8,),
                            job={**TINY_CPU_JOB, "steps": 6}, out=str(tmp_path), time_limit_s=120)
    panel.run()
    assert list(panel.jobs["status"]) == ["complete"], panel.status.value
    assert panel.figure.data and list(panel.figure.data[0].y) == pytest.approx([1.0])
