"""The committed notebooks: no outputs, one `parameters` cell of plain values that papermill reads, no sys.path edits,
and every batch profile names only parameters the notebooks declare."""

import ast
import re
from pathlib import Path

import nbformat
import papermill
import pytest

from colloc_kit.batch import runner as batch

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ALL = sorted(NOTEBOOKS.rglob("*.ipynb"))
TOP = sorted(NOTEBOOKS.glob(batch.NOTEBOOK_GLOB))
EXPERIMENTS = [nb for nb in TOP if nb.stem[:2] in {"02", "03", "04", "05", "06"}]


def parameters_cell(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: {len(cells)} cells tagged parameters, want exactly one"
    return cells[0]


def test_there_are_the_nine_notebooks_and_a_course():
    assert [nb.stem[:2] for nb in TOP] == ["01", "02", "03", "04", "05", "06", "07", "08", "09", "10"]
    exercises = {nb.name for nb in ALL if "course" in nb.parts and "solutions" not in nb.parts}
    solutions = {nb.name for nb in ALL if "solutions" in nb.parts}
    assert exercises and exercises == solutions  # every sheet has its teacher's copy, kept apart


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_committed_without_outputs_and_without_path_hacks(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs: clear them"
            assert "sys.path" not in cell.source, f"{path.name} edits sys.path; import the installed package"


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_parameters_cell_holds_plain_values_that_papermill_reads(path):
    cell = parameters_cell(path)
    names = []
    for node in ast.parse(cell.source).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, f"{path.name}: only NAME = value lines"
        ast.literal_eval(node.value)  # plain values only: derived values belong after this cell
        names.append(node.targets[0].id)
    assert list(papermill.inspect_notebook(str(path))) == names  # papermill parses every line (comments included)
    assert "PLOTLY_RENDERER" in names


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_experiment_notebooks_gate_their_panel_behind_interactive_in_one_call(path):
    source = parameters_cell(path).source
    assert "INTERACTIVE = False" in source
    (cell,) = [c for c in code_cells(path)[1:] if "INTERACTIVE" in c]  # after the parameters cell
    assert cell.startswith("colloc_kit.panel(INTERACTIVE, setup,") and len(ast.parse(cell).body) == 1


@pytest.mark.parametrize("profile", list(batch.load_profiles()))
def test_every_profile_names_only_declared_parameters(profile):
    planned = batch.plan(profile, batch.load_profiles(), NOTEBOOKS)
    assert [nb.stem for nb, _ in planned] == [nb.stem for nb in TOP]
    for _, values in planned:
        assert values["PLOTLY_RENDERER"] == batch.BATCH_PARAMETERS["PLOTLY_RENDERER"]


@pytest.mark.parametrize("path", [p for p in ALL if "course" in p.parts and "solutions" not in p.parts],
                         ids=lambda p: p.stem)
def test_exercise_sheets_hand_out_no_answers(path):
    solution = path.parent / "solutions" / path.name
    exercise, answer = code_cells(path), code_cells(solution)
    given = code_cells(path, REFERENCE_TAG)  # cells that compute the reference data: the same in both copies
    assert given == code_cells(solution, REFERENCE_TAG)
    tasks = [cell for cell in exercise[2:] if cell not in given]  # after the parameters and setup cells
    assert tasks and all("..." in t or t.lstrip().startswith("#") for t in tasks)
    assert exercise[:2] == answer[:2] and tasks != answer[2:]


REFERENCE_TAG = "reference"  # a sheet's cell that computes figures from a shipped reference set, not a task


def code_cells(path, tag: str | None = None) -> list[str]:
    """The sources of a notebook's code cells (those tagged `tag` only, where given)."""
    return [c.source for c in nbformat.read(path, as_version=4).cells
            if c.cell_type == "code" and (tag is None or tag in c.metadata.get("tags", []))]


# A measured figure quoted in prose: a rate ("5,827 images/s"), a gain ("1.87x"), a ratio ("ratio 1.78") or a
# thousands-separated count ("10,348"). A page computes its numbers from its own runs or a shipped reference set.
QUOTED_FIGURE = re.compile(r"\d[\d,.]*\s*(?:images|img)/s|\b\d+\.\d+\s*x\b|\bratio\s+\d|\b\d{1,3}(?:,\d{3})+\b")


def quoted_figures(path) -> list[str]:
    """The measured figures that a notebook's markdown cells quote, each with a little of its context."""
    return [text[max(0, m.start() - 30):m.end() + 10].replace("\n", " ")
            for text in (c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
            for m in QUOTED_FIGURE.finditer(text)]


def test_the_figure_check_finds_pasted_numbers():
    pasted = ("ResNet-18 trains 5,827 images/s at batch 64 and 10,348 at batch 128 (ratio 1.78); 2 copies naive "
              "8,726 (1.50x), MPS 1.87x")
    assert [m.group() for m in QUOTED_FIGURE.finditer(pasted)] == \
        ["5,827 images/s", "10,348", "ratio 1", "8,726", "1.50x", "1.87x"]
    assert not QUOTED_FIGURE.search("2 copies at batch 64 on 32x32 images, 95 % CIs, MPS x2, 3g+2g+1g+1g")


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_markdown_quotes_no_measured_figure(path):
    assert quoted_figures(path) == [], f"{path.name}: compute these in a code cell (its runs or reference.load)"


@pytest.mark.slow
def test_guess_before_you_run_executes_on_the_cpu_from_the_shipped_h200_set(tmp_path):
    (path,) = [nb for nb in TOP if nb.stem.startswith("09")]
    parameters = {"PLOTLY_RENDERER": batch.BATCH_PARAMETERS["PLOTLY_RENDERER"], "GUESS": 1.7}
    outcome = batch.execute(path, parameters, tmp_path)
    assert outcome.status == "ok", outcome.error
    text = "".join(o.get("text", "") for c in nbformat.read(tmp_path / path.name, as_version=4).cells
                   if c.cell_type == "code" for o in c.outputs)
    assert "Measured on the H200-141GB" in text and "Your guess, 1.70x, is off by" in text and "Reading:" in text


@pytest.mark.slow
def test_guess_before_you_run_as_shipped_stops_before_every_reveal_with_a_notice(tmp_path):
    (path,) = [nb for nb in TOP if nb.stem.startswith("09")]
    outcome = batch.execute(path, {"PLOTLY_RENDERER": batch.BATCH_PARAMETERS["PLOTLY_RENDERER"]}, tmp_path)
    assert outcome.status == "ok", outcome.error  # a notice, not an error: Run All goes through
    outputs = [o for c in nbformat.read(tmp_path / path.name, as_version=4).cells if c.cell_type == "code"
               for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs)
    assert "GUESS first: write your guess in the parameters cell" in text
    for reveal in ("DRAM bandwidth", "Measured on the H", "Reading:", "binds"):  # explain(), measured, reading
        assert reveal not in text, reveal
    assert not [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]  # no figure either
