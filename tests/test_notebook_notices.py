"""In a notebook, an interrupted cell and the kit's refusals end in one line, in Python terms (a real kernel)."""

import nbformat
import pandas as pd
import papermill
import pytest
from fake_results import fake_results, job_rows

from colloc_kit.batch import runner as batch
from colloc_kit.errors import BadInput
from colloc_kit.notebook import setup as notebook
from colloc_kit.pipeline.progress import Progress


def run_cells(tmp_path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, tmp_path / "in.ipynb")
    with pytest.raises(papermill.PapermillExecutionError):
        papermill.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
                                   kernel_manager_class=batch.current_python_kernel_manager(), progress_bar=False)
    return [o for c in nbformat.read(tmp_path / "out.ipynb", as_version=4).cells for o in c.get("outputs", [])
            if o.output_type == "error"]


@pytest.mark.parametrize("raised, shown", [
    ("KeyboardInterrupt()", notebook.INTERRUPTED_NOTICE),
    ("BadInput('CUDA is not available on this machine; use --device cpu')",
     'BadInput: CUDA is not available on this machine; use DEVICE = "cpu"'),
])
def test_an_interrupted_or_refused_cell_shows_one_line_not_a_traceback(tmp_path, raised, shown):
    (error,) = run_cells(tmp_path, "from colloc_kit import notebook\nfrom colloc_kit.errors import BadInput\n"
                                   "notebook.install_notices()", f"raise {raised}")
    assert error.traceback == [shown]


def test_one_line_flattens_a_message_and_names_the_kind():
    assert notebook.one_line(BadInput("raise --synthetic-samples or lower --batch-size;\nor use --device cpu")) == \
        'BadInput: raise synthetic_samples or lower batch_size; or use DEVICE = "cpu"'
    assert notebook.one_line(RuntimeError("x --not-a-kit-message")) == "RuntimeError: x --not-a-kit-message"
def test_noise_warning_counts_a_mixs_jobs_and_holds_jobs_one_after_another_to_1x():
    """Notebook 06 on the H100 once warned of a 3-job mix gaining 1.9x: it divided by copies (1), not by its jobs."""
    jobs = fake_results(job_rows("a", "exclusive", 1, [100.0])).jobs  # made-up rates: one lone job, no repeats
    mix = pd.DataFrame({"mode": ["mps"], "mode_label": ["mps"], "copies": [1], "n_jobs": [3],
                        "jobs_label": ["a + b + c"], "normalized_throughput_mean": [1.9]})
    assert notebook.noise_warning(jobs, mix) is None
    assert notebook.noise_warning(jobs, mix.assign(normalized_throughput_mean=[4.0])).startswith(
        "mps of a + b + c trained 4.0x one job alone, more than sharing can give (3 jobs at once can give at most 3x)")
    alone = pd.DataFrame({"mode": ["exclusive"], "mode_label": ["exclusive"], "copies": [4], "n_jobs": [4],
                          "normalized_throughput_mean": [1.44]})  # notebook 03 on a busy 2-core machine
    assert notebook.noise_warning(jobs, alone).startswith("exclusive x4 trained 1.4x one job alone, more than sharing "
                                                          "can give (one after another, jobs can give at most 1x)")



@pytest.mark.parametrize("stopped", [KeyboardInterrupt, RuntimeError])
def test_a_progress_bar_closed_by_an_interrupt_is_red_and_says_so_not_green_at_100_percent(stopped):
    """After Kernel > Interrupt of a notebook's last run, its bar once stayed green at 100 %."""
    from tqdm.notebook import tqdm as notebook_bar  # noqa: PLC0415 - the bar a notebook shows

    progress = Progress(total_runs=1)
    progress.bar.close()
    progress.bar = notebook_bar(total=1)  # as tqdm.auto picks it in a notebook's kernel
    progress.run_started("naive x2 r0", n_jobs=2)
    progress.run_finished("2/2 complete")  # the interrupted run is read back and counted, as the pipeline does
    with pytest.raises(stopped):
        try:
            raise stopped()
        finally:
            progress.close()
    bar = progress.bar.container.children[1]
    assert bar.bar_style == "danger" and bar.value == 1
    said = "interrupted" if stopped is KeyboardInterrupt else "stopped by an error"
    assert progress.bar.desc.startswith(f"naive x2 r0: {said}; what was measured is kept")


def test_a_progress_bar_closed_after_a_finished_experiment_is_green():
    from tqdm.notebook import tqdm as notebook_bar  # noqa: PLC0415 - the bar a notebook shows

    progress = Progress(total_runs=1)
    progress.bar.close()
    progress.bar = notebook_bar(total=1)
    progress.run_started("naive x2 r0", n_jobs=2)
    progress.run_finished("2/2 complete")
    progress.close()
    assert progress.bar.container.children[1].bar_style == "success"
