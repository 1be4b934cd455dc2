"""In a notebook, an interrupted cell and the kit's refusals end in one line, in Python terms (a real kernel)."""

import nbformat
import papermill
import pytest

from colloc_kit import batch, notebook
from colloc_kit.errors import BadInput


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
     'BadInput: CUDA is not available on this machine; use device="cpu"'),
])
def test_an_interrupted_or_refused_cell_shows_one_line_not_a_traceback(tmp_path, raised, shown):
    (error,) = run_cells(tmp_path, "from colloc_kit import notebook\nfrom colloc_kit.errors import BadInput\n"
                                   "notebook.install_notices()", f"raise {raised}")
    assert error.traceback == [shown]


def test_one_line_flattens_a_message_and_names_the_kind():
    assert notebook.one_line(BadInput("raise --synthetic-samples or lower --batch-size;\nor use --device cpu")) == \
        'BadInput: raise synthetic_samples or lower batch_size; or use device="cpu"'
    assert notebook.one_line(RuntimeError("x --not-a-kit-message")) == "RuntimeError: x --not-a-kit-message"
