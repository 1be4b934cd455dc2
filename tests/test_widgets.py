"""The notebooks' widget panel builds, runs through its Run callback in the background, redraws its figure, stops on
Stop or SIGINT keeping the run, and says every outcome in one status line."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_results import fake_results, job_rows
from processes import KitWatch, kit_processes_below_us

import colloc_kit
from colloc_kit.errors import BadInput
from colloc_kit.events import INTERVAL
from colloc_kit.modes import registered
from colloc_kit.notebook.panel import OFF_NOTICE, PLACEHOLDER, ExperimentPanel, panel
from colloc_kit.notebook.setup import Setup
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.spec import JobSpec
from colloc_kit.store.rundir import find_runs, read_events
from colloc_kit.worker.models import MODEL_NAMES

TINY_CPU_JOB = {"device": "cpu", "dataset": "synthetic", "image_size": 32, "synthetic_samples": 64, "warmup_steps": 2,
                "workers": 0}


def fake_run(calls, rates=None, status="complete", error=None):
    """A stand-in for colloc_kit.run: Results with made-up rates, from `rates` (for the run of as many copies) or a
    1.5x gain per copy (the lone job's 100 images/s)."""
    def run(jobs, mode, copies, out, name, time_limit_s, progress):
        calls.append({"jobs": jobs, "mode": mode, "copies": copies, "time_limit_s": time_limit_s})
        each = rates if rates and len(rates) == copies else [100.0 * (1 + 0.5 * (copies - 1)) / copies] * copies
        return fake_results(job_rows(f"r{copies}", mode.name, copies, each, model=jobs[0]["model"],
                                     batch_size=jobs[0]["batch_size"], status=status, error=error))
    return run


def test_panel_runs_each_chosen_copy_count_and_redraws_the_figure():
    calls = []
    panel = ExperimentPanel(models=["smallcnn", "resnet18"], modes=["exclusive", "naive"],
                            copies=(1, 2), job=dict(TINY_CPU_JOB), run_fn=fake_run(calls))
    panel.models.value = ("resnet18",)
    panel.batch_size.value = 64
    panel.steps.value = 12
    panel.copies.value = (1, 2, 4)
    panel.mode.value = panel.mode.options[1][1]
    panel.time_limit.value = 30
    panel.button.click()
    assert panel.wait(10)
    assert [c["copies"] for c in calls] == [1, 2, 4]
    assert calls[0]["jobs"] == [{**TINY_CPU_JOB, "model": "resnet18", "batch_size": 64, "steps": 12}]
    assert calls[0]["mode"].name == "naive" and calls[0]["time_limit_s"] == 30
    assert panel.progress.value == 3 and not panel.button.disabled
    (trace,) = panel.figure.data
    assert list(trace.x) == [1, 2, 4]
    assert list(trace.y) == pytest.approx([1.0, 1.5, 2.5])
    assert "done: Run 1 measured 7 jobs as repeat 1 of naive x1, x2, x4" in panel.status.value
    assert panel.progress.bar_style == "success"
    assert PLACEHOLDER not in str(panel.figure.layout.annotations) and panel.figure.layout.xaxis.visible is not False
    assert panel.widget.children[-1] is panel.figure  # the panel shows the redrawn figure


def test_copies_are_toggles_in_sight_and_a_gain_without_the_lone_job_measures_it_first():
    calls = []
    panel = ExperimentPanel(models=["smallcnn"], copies=(1, 2, 7), job=dict(TINY_CPU_JOB), run_fn=fake_run(calls))
    assert [b.description for b in panel.copies.buttons.values()] == [str(n) for n in range(1, 9)]
    assert panel.copies.value == (1, 2, 7) and "copies" in panel.copies.widget.children[0].value
    panel.copies.value = (2,)
    panel.run()
    assert panel.wait(10)
    assert [c["copies"] for c in calls] == [1, 2] and "1 copy added" in panel.status.value
    assert list(panel.figure.data[0].y) == pytest.approx([1.0, 1.5])  # a gain, not "no runs measured ..."
    panel.run()
    assert panel.wait(10)
    assert [c["copies"] for c in calls] == [1, 2, 2]  # the lone job is measured now: not added again


def test_a_reloaded_page_without_the_widgets_reads_a_line_saying_to_run_the_cell():
    panel = ExperimentPanel(models=["smallcnn"], job=dict(TINY_CPU_JOB), out="runs", name="03-panel")
    shown = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in shown
    assert "run this cell again" in shown["text/plain"] and "runs/03-panel" in shown["text/plain"]


def test_a_mode_that_cannot_run_here_is_not_offered_and_the_status_line_says_why():
    """On a CPU, notebook 04's panel once preselected MPS, then said 'BadInput: ...' when Run was pressed."""
    panel = ExperimentPanel(models=["smallcnn"], modes=["mps", "naive", {"name": "mps", "thread_percentage": 50}],
                            job=dict(TINY_CPU_JOB), run_fn=fake_run([]))
    assert [label for label, _ in panel.mode.options][:2] == ["naive", "exclusive"]  # the first that runs here
    assert "mps is not offered here" in panel.status.value
    assert "mps(thread_percentage=50) is not offered here" in panel.status.value
    assert panel.live_gpu not in panel.widget.children  # a CPU run has no GPU panels to leave empty


def test_a_second_run_of_the_same_cell_draws_its_own_live_lines_not_the_firsts():
    measured: list[dict] = []

    def run(jobs, mode, copies, out, name, time_limit_s, progress):
        progress.run_started("naive x1 r0", 1)  # the same label each time, as a rerun of one cell has
        for t in (1.0, 2.0):
            progress.on_event({"type": INTERVAL, "job": "j0", "t": t, "interval_images": 50.0, "interval_s": 1.0})
        repeat = len(measured)
        measured.extend(dict(row, repeat=repeat) for row in job_rows(f"r{repeat}", "naive", 1, [50.0]))
        return fake_results(measured)  # as colloc_kit.run returns: the experiment's earlier runs too

    panel = ExperimentPanel(models=["smallcnn"], copies=(1,), job=dict(TINY_CPU_JOB), run_fn=run)
    for _ in range(2):
        panel.button.click()
        assert panel.wait(10)
    assert len(panel.live_history()) == 4  # every reading is kept
    (trace,) = panel.live.data
    assert list(trace.x) == [0.0, 1.0]  # the last run's two readings only
    assert panel.status.value.startswith("done: Run 2 measured 1 job as repeat 2 of naive x1")  # this Run's, not 2


def test_the_live_view_shows_the_run_under_way_from_its_start_and_the_stopped_run_after_stop():
    started, release = threading.Event(), threading.Event()

    def run(jobs, mode, copies, out, name, time_limit_s, progress):
        progress.run_started("naive x1 r0", 1)
        if len(panel.live_history()):  # the second Run: nothing of the first may show while it waits
            started.set()
            release.wait(10)
            raise KeyboardInterrupt
        progress.on_event({"type": INTERVAL, "job": "j0", "t": 1.0, "interval_images": 50.0, "interval_s": 1.0})
        return fake_results(job_rows("r1", "naive", 1, [50.0]))

    panel = ExperimentPanel(models=["smallcnn"], copies=(1,), job=dict(TINY_CPU_JOB), run_fn=run)
    panel.button.click()
    assert panel.wait(10) and len(panel.live.data) == 1
    panel.button.click()
    assert started.wait(10)
    assert panel.live.data == () and "the panel's run 2, waiting" in panel.live.layout.title.text
    release.set()
    assert panel.wait(10) and "interrupted" in panel.status.value
    assert panel.live.data == ()  # the stopped run had no reading: the first run's lines are not shown as its


def test_the_panels_steps_replace_a_seconds_budget_of_the_notebooks_job():
    """The GPU profiles give jobs a seconds budget; the panel's steps replace it instead of making two budgets."""
    calls = []
    panel = ExperimentPanel(models=["resnet18"], copies=(2,), job={"amp": "bf16", "seconds": 8, "warmup_steps": 10},
                            run_fn=fake_run(calls))
    panel.steps.value = 40
    panel.button.click()
    assert panel.wait(10)
    assert calls[0]["jobs"] == [{"amp": "bf16", "warmup_steps": 10, "model": "resnet18", "batch_size": 32, "steps": 40}]
    JobSpec.from_mapping(calls[0]["jobs"][0])  # one budget: a valid job


def test_the_panel_call_is_off_in_a_batch_and_says_how_to_turn_it_on(capsys):
    setup = Setup("cpu", ["smallcnn"], dict(TINY_CPU_JOB), tiny=True, gpu=False)
    assert panel(False, setup, modes=["naive"], copies=[1, 2], batch_size=16, name="p") is None
    assert capsys.readouterr().out == OFF_NOTICE + "\n"


@pytest.fixture
def mps_runs_here(monkeypatch):
    """As on a GPU machine with MPS: the mps mode says it runs here (nothing is run in these tests)."""
    monkeypatch.setattr(registered()["mps"], "unavailable_here", classmethod(lambda cls, device="cuda", gpu=0: None))


@pytest.mark.parametrize("tiny", [True, False])
def test_the_panel_call_builds_the_panel_from_the_notebooks_setup(tiny, mps_runs_here):
    setup = Setup("cuda", ["resnet18"], {"device": "cuda", "amp": "bf16", "seconds": 8}, tiny=tiny, gpu=True)
    shown = panel(True, setup, modes=["mps", {"name": "mps", "thread_percentage": 50}], copies=[2, 4], batch_size=64,
                  name="04-mps-panel", out="elsewhere", time_limit_s=30)
    assert shown.models.value == ("resnet18",)
    assert shown.models.options == (("resnet18",) if tiny else ("resnet18", *sorted(set(MODEL_NAMES) - {"resnet18"})))
    assert [label for label, _ in shown.mode.options[:2]] == ["mps", "mps(thread_percentage=50)"]
    assert shown.mode.label == "mps"
    assert shown.copies.value == (2, 4) and shown.batch_size.value == 64 and shown.time_limit.value == 30
    assert shown.job == {"batch_size": 64, "device": "cuda", "amp": "bf16", "seconds": 8}
    assert (shown.out, shown.name) == (Path.cwd() / "elsewhere", "04-mps-panel")


def test_bad_input_shows_in_the_status_line_and_the_panel_stays_usable():
    def refuse(*args, **kwargs):
        raise BadInput("unknown model 'resnet9'; valid models: resnet18, ...")

    panel = ExperimentPanel(models=["resnet9"], job=dict(TINY_CPU_JOB), run_fn=refuse)
    panel.run()
    assert panel.wait(10)
    assert "not run" in panel.status.value and "resnet9" in panel.status.value and "Traceback" not in panel.status.value
    assert not panel.button.disabled and len(panel.jobs) == 0 and panel.progress.bar_style == "danger"


def test_the_panel_starts_from_the_notebooks_choices_and_offers_the_rest_behind_them(mps_runs_here):
    panel = ExperimentPanel(models=["resnet18"], more_models=["alexnet", "efficientnet_b0", "resnet18"],
                            modes=["mps", "naive"], copies=(2, 7), batch_sizes=(32, 128), job={"batch_size": 64})
    assert panel.models.options == ("resnet18", "alexnet", "efficientnet_b0") and panel.models.value == ("resnet18",)
    assert panel.mode.label == "mps" and panel.copies.value == (2, 7) and panel.batch_size.value == 64


def test_run_with_no_model_chosen_says_what_to_choose_and_starts_nothing():
    calls = []
    panel = ExperimentPanel(models=["smallcnn"], job=dict(TINY_CPU_JOB), run_fn=fake_run(calls))
    panel.models.value = ()
    panel.run()
    assert panel.status.value == "<b>not run</b>: choose at least one model in the models list"
    assert calls == [] and panel.task is None and panel.progress.bar_style == "danger"


def test_jobs_that_did_not_complete_show_their_reason_and_turn_the_bar_red():
    panel = ExperimentPanel(models=["smallcnn"], copies=(1,), job=dict(TINY_CPU_JOB),
                            run_fn=fake_run([], status="timed_out", error="stopped at its time limit"))
    panel.run()
    assert panel.wait(10)
    assert "1 did not complete</b>: j0 timed_out (stopped at its time limit)" in panel.status.value
    assert panel.progress.bar_style == "danger"


def test_identical_jobs_that_differ_are_fairness_not_a_noise_warning():
    panel = ExperimentPanel(models=["smallcnn"], copies=(2,), job=dict(TINY_CPU_JOB),
                            run_fn=fake_run([], rates=[50, 150]))
    panel.run()
    assert panel.wait(10)
    assert "warning" not in panel.status.value and panel.progress.bar_style == "success"


def test_a_gain_beyond_what_its_jobs_can_give_is_a_warning_and_the_figure_says_not_a_result():
    def run(jobs, mode, copies, out, name, time_limit_s, progress):  # made-up rates: 2 copies at 3x one alone
        return fake_results(job_rows(f"r{copies}", mode.name, copies, [100.0] if copies == 1 else [150.0] * copies))

    panel = ExperimentPanel(models=["smallcnn"], copies=(1, 2), job=dict(TINY_CPU_JOB), run_fn=run)
    panel.run()
    assert panel.wait(10)
    assert "<b>warning</b>: naive x2 trained 3.0x one job alone" in panel.status.value
    assert panel.progress.bar_style == "warning"
    assert panel.figure.layout.title.text.endswith("(not a result: too noisy)")  # the figure says so too


def endless_run(started):
    """A stand-in for colloc_kit.run that trains forever (sleeps) until interrupted."""
    def run(*args, **kwargs):
        started.set()
        while True:
            time.sleep(0.05)
    return run


@pytest.mark.parametrize("how", ["stop button", "sigint"])
def test_stop_and_sigint_end_a_background_run_with_an_interrupted_notice(how):
    started = threading.Event()
    panel = ExperimentPanel(models=["smallcnn"], copies=(1, 2), job=dict(TINY_CPU_JOB), run_fn=endless_run(started))
    panel.button.click()
    assert started.wait(10) and panel.button.disabled and not panel.stop_button.disabled
    if how == "stop button":
        panel.stop_button.click()
    else:
        os.kill(os.getpid(), signal.SIGINT)  # what Kernel > Interrupt sends; it reaches the main thread only
    assert panel.wait(10)
    assert panel.status.value.startswith("<b>interrupted</b>: the jobs were stopped; the run is kept")
    assert panel.progress.bar_style == "warning" and not panel.button.disabled and panel.stop_button.disabled


def test_sigint_without_a_panel_run_interrupts_as_before():
    ExperimentPanel(models=["smallcnn"], job=dict(TINY_CPU_JOB))
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


@pytest.mark.slow
def test_sigint_still_interrupts_in_a_test_run_started_with_sigint_ignored():
    """`bash .ci/run > log &` starts pytest with SIGINT ignored, as shells start every background command; the tests
    that interrupt still get their KeyboardInterrupt (the suite's conftest gives SIGINT Python's handler back)."""
    here = Path(__file__)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"tests/{here.name}::test_sigint_without_a_panel_run_interrupts_as_before"]
    pytest_ignoring_sigint = ("import os, signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                              f"os.execv({argv[0]!r}, {argv!r})")
    run = subprocess.run([sys.executable, "-c", pytest_ignoring_sigint], capture_output=True, text=True, timeout=300,
                         cwd=here.parents[1])
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-2000:]


@pytest.mark.slow
def test_panel_drives_a_real_tiny_cpu_run(tmp_path):
    panel = ExperimentPanel(models=["smallcnn"], modes=["naive"], copies=(1,), batch_sizes=(8,),
                            job={**TINY_CPU_JOB, "steps": 6}, out=str(tmp_path), time_limit_s=120)
    panel.run()
    assert panel.wait(120)
    assert list(panel.jobs["status"]) == ["complete"], panel.status.value
    assert panel.figure.data and list(panel.figure.data[0].y) == pytest.approx([1.0], rel=0.25)  # a lone job: about 1
    panel.run()  # the same settings again: a new repeat measured, not the stored cell returned
    assert panel.wait(120)
    assert len(find_runs(tmp_path)) == 2 and list(panel.jobs["repeat"]) == [0, 1], panel.status.value


def zygotes(path):
    """The parents of every job under `path` (each job's ready event): the zygotes its jobs forked from."""
    return {event["ppid"] for run in find_runs(path) for job in run.read_manifest().jobs
            for event in read_events(run.events_path(job.job)) if event["type"] == "ready"}


@pytest.mark.own_zygote
@pytest.mark.slow
def test_a_runs_copy_counts_fork_from_one_zygote_its_own_beside_the_kernels(tmp_path):
    """A Run's cells (one `run` per copy count, in the panel's thread) share one zygote: torch imported once a Run; its
    own, even while the kernel's thread has its runs share one (`shared_zygote`: a sweep running as Run is pressed)."""
    with shared_zygote():
        colloc_kit.run([{**TINY_CPU_JOB, "model": "smallcnn", "batch_size": 8, "steps": 6}], out=tmp_path / "kernel",
                       monitor=False, progress=False)
        panel = ExperimentPanel(models=["smallcnn"], modes=["naive"], copies=(1, 2), batch_sizes=(8,),
                                job={**TINY_CPU_JOB, "steps": 6}, out=str(tmp_path / "panel"), time_limit_s=120)
        panel.run()
        assert panel.wait(120)
    assert list(panel.jobs["status"]) == ["complete"] * 3, panel.status.value
    assert len(zygotes(tmp_path / "panel")) == 1 and zygotes(tmp_path / "panel") != zygotes(tmp_path / "kernel")


@pytest.mark.slow
def test_stopping_a_real_cpu_run_keeps_it_marked_interrupted_and_leaves_no_process(tmp_path):
    panel = ExperimentPanel(models=["smallcnn"], modes=["naive"], copies=(2,), batch_sizes=(8,),
                            job={**TINY_CPU_JOB, "steps": 100_000}, out=str(tmp_path), time_limit_s=300)
    panel.run()
    deadline = time.monotonic() + 120
    while not any('"start"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")):
        assert time.monotonic() < deadline and panel.task.running, panel.status.value
        time.sleep(0.2)
    panel.stop()
    assert panel.wait(10), "the run did not stop within 10 s"
    (manifest,) = tmp_path.rglob("manifest.json")
    assert json.loads(manifest.read_text())["status"] == "interrupted"
    assert "interrupted" in panel.status.value
    assert not kit_processes_below_us()


@pytest.mark.slow
@pytest.mark.parametrize("end", ["killed", "shut down", "interrupted, then killed"])
def test_a_panels_run_in_a_kernel_leaves_no_process_once_the_kernel_is_gone(tmp_path, end):
    """A real ipykernel runs a panel's run (its zygote and two workers training); the kernel is then killed (SIGKILL,
    as JupyterLab does to a kernel that does not shut down), shut down, or interrupted and killed at once, before its
    interrupt is through. None of the kit's processes outlives it."""
    manager = pytest.importorskip("jupyter_client.manager", reason="needs Jupyter (pip install -e '.[dev]')")
    km, kc = manager.start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    watch = KitWatch(km.provisioner.process.pid)
    try:
        reply = kc.execute_interactive(
            "from colloc_kit.notebook.panel import ExperimentPanel\n"
            "panel = ExperimentPanel(models=['smallcnn'], modes=['naive'], copies=(1,), batch_sizes=(8,), "
            f"job={ {**TINY_CPU_JOB, 'steps': 6}!r}, out={str(tmp_path)!r}, time_limit_s=300)\n"
            "panel.run()\n"  # the lone job first (a short one), else the Run of 2 copies below would add it first
            "assert panel.wait(120), panel.status.value\n"
            "panel.copies.value, panel.steps.value = (2,), 100_000\n"
            "panel.run()", timeout=180)
        assert reply["content"]["status"] == "ok", reply["content"]
        deadline = time.monotonic() + 120
        while (sum('"start"' in p.read_text() for p in tmp_path.rglob("*.events.jsonl")) < 3
               or len(watch.seen) < 3):  # the lone job and both copies started; a zygote and two workers are seen
            assert time.monotonic() < deadline, f"the run did not start: {len(watch.seen)} kit process(es) seen"
            time.sleep(0.2)
        if end.startswith("interrupted"):
            km.interrupt_kernel()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=end != "shut down")
    left = watch.survivors(grace_s=30)
    for proc in left:  # ours: ended before the assertion, so that they cannot starve the tests after this one
        proc.kill()
    assert not left, f"{len(left)} of the kit's processes outlived the kernel"


@pytest.mark.slow
def test_a_batch_larger_than_the_data_is_one_line_in_python_terms(tmp_path):
    panel = ExperimentPanel(models=["smallcnn"], copies=(1,), batch_sizes=(128,), job={**TINY_CPU_JOB, "steps": 6},
                            out=str(tmp_path))
    panel.run()
    assert panel.wait(60)
    assert panel.status.value.startswith("<b>not run</b>: BadInput: synthetic_samples (64) is smaller than one batch")
    assert "raise synthetic_samples or lower batch_size" in panel.status.value


@pytest.mark.slow
def test_the_live_view_draws_each_jobs_throughput_while_it_runs_and_keeps_the_history(tmp_path):
    panel = ExperimentPanel(models=["smallcnn"], modes=["naive"], copies=(2,), batch_sizes=(8,),
                            job={**TINY_CPU_JOB, "steps": 100, "interval_s": 0.1}, out=str(tmp_path))
    panel.run()
    assert panel.wait(120), panel.status.value
    history = panel.live_history()
    assert set(history["job"]) == {"j0-smallcnn", "j1-smallcnn"} and (history["images_per_s"] > 0).all()
    assert history.groupby("job").size().min() > 1  # readings while it ran, not one at the end
    assert sorted(trace.name for trace in panel.live.data) == ["j0-smallcnn", "j1-smallcnn"]
    assert panel.widget.children[1] is panel.live


def test_the_live_view_draws_the_runs_gpu_as_the_monitor_samples_it():
    """A stand-in run that reports three GPU samples through its Progress, as the monitor does on a GPU."""
    def run(jobs, mode, copies, out, name, time_limit_s, progress):
        for i in range(3):
            progress.gpu_sample({"t": 100.0 + i, "gpu_util_pct": 90.0, "sm_util_pct": 40.0 + i,
                                 "mem_used_mb": 4096.0, "power_w": 300.0 + i})
        return fake_results(job_rows(f"r{copies}", mode.name, copies, [100.0] * copies, model=jobs[0]["model"],
                                     batch_size=jobs[0]["batch_size"]))

    panel = ExperimentPanel(models=["smallcnn"], copies=(1,), job=dict(TINY_CPU_JOB), run_fn=run)
    panel.button.click()
    assert panel.wait(10)
    history = panel.live_gpu_history()
    assert list(history["sm_active_pct"]) == [40.0, 41.0, 42.0]  # GPM's SM activity where the GPU has it
    sm, memory, power = panel.live_gpu.data
    assert list(sm.y) == [40.0, 41.0, 42.0] and list(memory.y) == [4.0] * 3 and list(power.y) == [300.0, 301.0, 302.0]
    assert list(sm.x) == [0.0, 1.0, 2.0]
