"""`colloc-kit batch`: the cpu-smoke profile executes every notebook into offline HTML; a failing notebook is reported
while the others run; bad input is refused before anything runs; the kernel is this Python's."""

import argparse
import asyncio
import json
import re
import sys

import nbformat
import pytest
from pathlib import Path

from colloc_kit.batch import command, pages
from colloc_kit.batch import runner as batch
from colloc_kit.errors import BadInput

PLOTLY_MIME = "application/vnd.plotly.v1+json"


def outputs(path):
    return [o for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" for o in c.outputs]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_cpu_smoke_executes_every_notebook_without_an_error_cell(smoke):
    assert [n.stem for n in sorted(batch.default_notebooks_dir().glob(batch.NOTEBOOK_GLOB))] == \
        [n.name for n in smoke.notebooks]
    assert smoke.failed == [], [(n.name, n.error) for n in smoke.failed]
    for n in smoke.notebooks:
        assert not [o for o in outputs(smoke.folder / n.ipynb) if o.output_type == "error"], n.name


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_each_report_draws_its_figures_with_the_folders_one_plotly_js_and_nothing_from_a_cdn(smoke):
    assert (smoke.folder / batch.PLOTLY_JS).read_text().count("plotly.js v") >= 1
    for n in smoke.notebooks:
        figures = [o for o in outputs(smoke.folder / n.ipynb) if PLOTLY_MIME in o.get("data", {})]
        assert figures, f"{n.name} drew no plotly figure"
        page = (smoke.folder / n.html).read_text()
        assert len(page.encode()) < 1_000_000, f"{n.name}: {len(page.encode()):,} bytes"
        assert page.count("Plotly.newPlot(") >= len(figures), n.name
        assert re.findall(r'<script[^>]* src="([^"]*)"', page) == [batch.PLOTLY_JS], n.name  # no require.js, MathJax
        assert "plotly.js v" not in page  # not inline


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_reports_hide_code_and_show_the_parameters_as_a_table(smoke):
    for n in smoke.notebooks:
        page = (smoke.folder / n.html).read_text()
        assert 'class="jp-CodeMirrorEditor' not in page and "INTERACTIVE = False" not in page, n.name
        given = n.parameters.keys() - batch.BATCH_PARAMETERS.keys()
        if given:
            assert "Parameters of this run" in page and all(f"<td>{k}</td>" in page for k in given), n.name


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_analysis_notebook_reads_the_runs_of_the_experiment_notebooks(smoke):
    (analysis,) = [n for n in smoke.notebooks if n.name == "07_analysis"]
    text = "".join(o.get("text", "") for o in outputs(smoke.folder / analysis.ipynb) if o.output_type == "stream")
    for experiment in ("02-single-job", "03-naive", "06-mixed"):
        assert experiment in text
    index = (smoke.folder / "index.html").read_text()
    assert all(f'href="{n.html}"' in index for n in smoke.notebooks)
    for fact in ("date", "machine", "GPU", "profile", "total time"):
        assert f"<th>{fact}</th>" in index
    assert "<td>cpu-smoke</td>" in index and f"<td>{smoke.seconds:,.0f} s</td>" in index
    assert json.loads((smoke.folder / "batch.json").read_text())["profile"] == "cpu-smoke"


def notebook(path, *sources, parameters="INTERACTIVE = False\nPLOTLY_RENDERER = ''\nN = 1"):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell(parameters)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell] + [nbformat.v4.new_markdown_cell(s) if s.startswith("## ") else nbformat.v4.new_code_cell(s)
                         for s in sources]
    nbformat.write(nb, path)


@pytest.fixture
def tiny(tmp_path):
    books = tmp_path / "notebooks"
    books.mkdir()
    notebook(books / "01_fails.ipynb", "x = N", "raise RuntimeError(f'broken on purpose {N}')", "print('after')",
             "## Reading\n\nThe figure above shows a gain.")
    notebook(books / "02_works.ipynb", "import sys\nprint(sys.executable)\nN * 2",
             "from colloc_kit import notebook\nnotebook.warn('identical jobs differ 2.1x')")
    return books


@pytest.mark.slow
def test_a_failing_notebook_is_reported_with_its_cell_and_the_others_still_run(tiny, tmp_path):
    parser = argparse.ArgumentParser()
    command.add_subcommand(parser.add_subparsers())
    profiles = {"t": {"notebooks": {"01_fails": {"N": 7}}}}
    args = parser.parse_args(["batch", "--profile", "t", "--notebooks", str(tiny), "--out", str(tmp_path / "out")])
    report = batch.run_batch(args.profile, out=args.out, notebooks_dir=args.notebooks, profiles=profiles)
    failed, works = report.notebooks
    assert (failed.status, works.status) == ("failed", "ok")
    # In [4]: parameters, papermill's injected parameters, x = N, then the raise
    assert failed.error == "RuntimeError: broken on purpose 7" and failed.error_cell == 4
    assert "raise RuntimeError" in failed.error_source
    assert (report.folder / failed.html).exists()
    streams = "".join(o.get("text", "") for o in outputs(report.folder / works.ipynb))
    assert sys.executable in streams  # the kernel is this very Python
    assert "broken on purpose 7" in (report.folder / "index.html").read_text()
    page = (report.folder / failed.html).read_text()
    assert "broken on purpose 7" in page and "stopped here with an error" in page
    assert "Reading" not in page and "shows a gain" not in page  # no reading of what was not computed


def test_a_notebook_whose_kernel_died_has_a_page_that_says_so_and_nothing_after(tmp_path):
    books = tmp_path / "notebooks"
    books.mkdir()
    notebook(books / "01_dies.ipynb", "print('before it died')", "import os\nos._exit(1)", "print('after')",
             "## Reading\n\nThe figure above shows a gain.")
    report = batch.run_batch("t", out=tmp_path / "out", notebooks_dir=books, profiles={"t": {}})
    (dead,) = report.notebooks
    assert dead.status == "failed" and dead.error.startswith("DeadKernelError")
    page = (report.folder / dead.html).read_text()
    assert "before it died" in page and "stopped here with an error" in page and "DeadKernelError" in page
    assert "Reading" not in page and "shows a gain" not in page and "os._exit" not in page.split("stopped here")[1]


def test_the_index_lists_each_notebooks_warnings_and_the_size_of_its_page(tiny, tmp_path):
    report = batch.run_batch("t", out=tmp_path / "out", notebooks_dir=tiny, profiles={"t": {}}, only=["02"])
    (works,) = report.notebooks
    assert works.warnings == ["identical jobs differ 2.1x"]
    assert works.html_bytes == (report.folder / works.html).stat().st_size > 0
    index = (report.folder / "index.html").read_text()
    assert "<li>identical jobs differ 2.1x</li>" in index and "1 with warnings" in index
    assert f"{works.html_bytes / 1e6:.2f} MB" in index


@pytest.mark.slow
def test_self_contained_pages_hold_plotly_js_once_and_light_ones_say_where_it_is_missing(tiny, tmp_path):
    notebook(tiny / "03_figure.ipynb", "import plotly.graph_objects as go\nimport plotly.io as pio\n"
             "pio.renderers.default = 'plotly_mimetype'\ngo.Figure(go.Bar(y=[1, 2]))")
    light, whole = (batch.run_batch("t", out=tmp_path / name, notebooks_dir=tiny, profiles={"t": {}}, only=["03"],
                                    self_contained=name == "whole") for name in ("light", "whole"))
    light_page = (light.folder / light.notebooks[0].html).read_text()
    whole_page = (whole.folder / whole.notebooks[0].html).read_text()
    assert (light.folder / batch.PLOTLY_JS).exists() and not (whole.folder / batch.PLOTLY_JS).exists()
    assert re.findall(r'<script[^>]* src="([^"]*)"', light_page) == [batch.PLOTLY_JS]
    assert "plotly.min.js, which lay beside this page" in light_page and "--self-contained" in light_page
    assert re.findall(r'<script[^>]* src="([^"]*)"', whole_page) == [] and whole_page.count("plotly.js v") == 1
    assert "which lay beside this page" not in whole_page


@pytest.mark.slow
def test_show_code_keeps_the_code_cells_and_the_default_report_hides_them(tiny, tmp_path):
    profiles = {"t": {"notebooks": {"02_works": {"N": 5}}}}
    hidden, shown = (batch.run_batch("t", out=tmp_path / name, notebooks_dir=tiny, profiles=profiles, only=["02"],
                                     show_code=name == "shown").notebooks[0] for name in ("hidden", "shown"))
    page = lambda name, n: (tmp_path / name).glob(f"*/{n.html}").__next__().read_text()  # noqa: E731
    code = 'class="jp-CodeMirrorEditor'  # a code cell's source
    assert code in page("shown", shown) and code not in page("hidden", hidden)
    assert "<td>N</td>" in page("hidden", hidden) and "<code>5</code>" in page("hidden", hidden)
    assert ">10<" in page("hidden", hidden).replace("&#39;", "")  # the output of N * 2 stays


@pytest.mark.slow
def test_main_batch_exits_1_when_a_notebook_failed(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "load_profiles", lambda: {"t": {}})
    args = argparse.Namespace(profile="t", out=str(tmp_path / "out"), parameters=["N=3"], only=["02"],
                              notebooks=str(tiny), show_code=False)
    assert command.main_batch(args) == 0
    args.only = None
    assert command.main_batch(args) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"profile": "nope"}, "unknown batch profile 'nope'"),
    ({"overrides": {"NOT_A_PARAMETER": 1}}, "no chosen notebook has parameter(s) NOT_A_PARAMETER"),
    ({"only": ["09"]}, "--only 09: no such notebook"),
    ({"profiles": {"t": {"notebooks": {"02_works": {"M": 1}}}}}, "02_works has no parameter(s) M"),
    ({"profiles": {"t": {"notebooks": {"05_gone": {}}}}}, "names notebooks that do not exist: 05_gone"),
])
def test_bad_input_is_refused_before_anything_runs(tiny, tmp_path, kwargs, message):
    call = {"profile": "t", "profiles": {"t": {}}, **kwargs}
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        batch.run_batch(out=tmp_path / "out", notebooks_dir=tiny, **call)
    assert not (tmp_path / "out").exists()


def test_a_parameters_contents_are_checked_before_any_notebook_starts(tmp_path):
    """Before: `batch -p 'JOB={steps: -5}'` ran a notebook, which then failed (issue 53)."""
    for overrides, says in [({"JOB": {"steps": -5}}, "-p JOB={'steps': -5}: 02_single_job_baseline cannot run it "
                                                     "(job: steps must be a positive integer, got -5)"),
                            ({"MODELS": ["resnet51"]}, "02_single_job_baseline: the parameters name an unknown model "
                                                       "'resnet51' (did you mean 'resnet50'?)")]:
        with pytest.raises(BadInput) as refused:
            batch.run_batch(profile="cpu-smoke", out=tmp_path / "out", overrides=overrides, only=["02"])
        assert says in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_a_broken_notebook_is_named(tmp_path):
    """Before: a --notebooks folder whose only notebook is not JSON was answered with "profile cpu-smoke names
    notebooks that do not exist" (issue 53)."""
    books = tmp_path / "nb"
    books.mkdir()
    (books / "01_torn.ipynb").write_text('{"cells": [')
    with pytest.raises(BadInput, match=r"01_torn.ipynb cannot be read as a notebook \(NotJSONError"):
        batch.run_batch(profile="cpu-smoke", out=tmp_path / "out", notebooks_dir=books)
    assert not (tmp_path / "out").exists()


def test_parameters_from_the_command_line_are_read_as_yaml():
    assert command.parse_parameters(["COPIES=[1, 2]", "AMP=bf16", "N=3"]) == {"COPIES": [1, 2], "AMP": "bf16", "N": 3}
    with pytest.raises(BadInput, match="KEY=VALUE"):
        command.parse_parameters(["COPIES"])


def test_the_kernel_is_this_python_even_with_a_stale_python3_kernelspec(tmp_path, monkeypatch):
    stale = tmp_path / "jupyter" / "kernels" / "python3"
    stale.mkdir(parents=True)
    (stale / "kernel.json").write_text(json.dumps({"argv": ["/nonexistent/python", "-m", "ipykernel_launcher", "-f",
                                                            "{connection_file}"], "display_name": "stale",
                                                   "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    manager = batch.current_python_kernel_manager()(kernel_name="python3")
    assert manager.kernel_spec.argv[0] == sys.executable


def test_a_kernel_started_outside_a_batch_folder_leaves_no_log_where_it_started(tmp_path, monkeypatch):
    """Before: the manager wrote kernels.stderr.log into whatever folder the process stood in (nbclient, a test)."""
    monkeypatch.chdir(tmp_path)
    manager = batch.current_python_kernel_manager()(kernel_name="python3")

    async def start_and_stop():
        await manager.start_kernel()
        await manager.shutdown_kernel(now=True)

    asyncio.run(start_and_stop())
    assert not (tmp_path / batch.KERNEL_LOG).exists()


COURSE = sorted((batch.default_notebooks_dir() / "course").rglob("*.ipynb"))
WITH_THE_TEACHER_COPIES = pytest.mark.xdist_group("session-teacher_first_runs")  # conftest's name: one worker, one run


@pytest.mark.slow
@pytest.mark.parametrize("sheet", [pytest.param(p, marks=WITH_THE_TEACHER_COPIES) if p.parent.name == "solutions"
                                   else p for p in COURSE],
                         ids=lambda p: str(p.relative_to(p.parents[1] if p.parent.name == "solutions" else p.parent)))
def test_every_course_sheet_and_its_solution_runs_headless_on_this_machine(tmp_path, sheet, request):
    """A solution's run is the session's first run of that teacher copy, which tests/test_teacher_copies.py runs a
    second time; an exercise sheet runs here."""
    if sheet.parent.name == "solutions":
        outcome, folder, _ = request.getfixturevalue("teacher_first_runs")(sheet)
    else:
        outcome, folder = batch.execute(sheet, {"PLOTLY_RENDERER": batch.BATCH_PARAMETERS["PLOTLY_RENDERER"]},
                                        tmp_path), tmp_path
    assert outcome.status == "ok", outcome.error
    if sheet.parent.name == "solutions":  # the answers draw their figures
        assert any(PLOTLY_MIME in o.get("data", {}) for o in outputs(folder / outcome.ipynb))


def test_pages_share_one_stylesheet_link_index_previous_next_and_the_index_says_what_each_is_and_counts_flags(
        tiny, tmp_path):
    notebook(tiny / "03_flags.ipynb", "## What it shows\n\nA table with a flag. More prose.",
             "print('naive x2: common window only 1.2 s (< 2 s); wide CI (+-30.0 %)')", "## Reading\n\nIt is short.")
    report = batch.run_batch("t", out=tmp_path / "out", notebooks_dir=tiny, profiles={"t": {}}, only=["02", "03"])
    works, flagged = report.notebooks
    css = report.folder / "jupyterlab.css"
    assert css.stat().st_size > 100_000  # JupyterLab's stylesheet, once for the folder
    for n, links in ((works, ['href="index.html"', 'href="03_flags.html"']),
                     (flagged, ['href="index.html"', 'href="02_works.html"'])):
        page = (report.folder / n.html).read_text()
        assert page.count('<link rel="stylesheet" href="jupyterlab.css">') == 1 and n.html_bytes < css.stat().st_size
        assert all(link in page for link in links) and str(tmp_path) not in page  # no absolute path
        assert "body .jp-OutputArea-output pre {word-break: normal;" in page  # printed lines break between words
    assert 'href="#What-it-shows"' in (report.folder / flagged.html).read_text()  # its contents
    assert flagged.summary == "A table with a flag."
    assert flagged.flags == {"windows under 2 s": 1, "wide CIs": 1}
    index = (report.folder / "index.html").read_text()
    assert "<small>A table with a flag.</small>" in index and "<li>1 window under 2 s</li>" in index


def test_the_index_summary_is_the_first_sentence_whole_past_an_e_g(tmp_path):
    notebook(tmp_path / "06_x.ipynb", "## 06 · Title\n\nMPS can split the GPU (e.g. 60 % / 30 %) in shapes MIG cannot. "
             "This page runs its MIX.")
    assert pages.summary_of(tmp_path / "06_x.ipynb") == "MPS can split the GPU (e.g. 60 % / 30 %) in shapes MIG cannot."


@pytest.mark.slow
def test_a_kernels_sockets_live_in_a_private_folder_never_in_the_batch_folder(tmp_path, monkeypatch):
    """Before: the ipc transport put its `kernel-ipc-N` sockets in the folder the kernel ran in (the batch folder),
    where a batch killed outright (SIGKILL) left them (issue 53). Now they live in a folder only this user can open,
    removed with the kernel's resources."""
    monkeypatch.chdir(tmp_path)
    manager = batch.current_python_kernel_manager(tmp_path)(kernel_name="python3")
    sockets = Path(manager.ip).parent

    async def start_and_look():
        await manager.start_kernel()
        try:
            for _ in range(100):  # the kernel binds its sockets as it starts
                if len(private := sorted(p.name for p in sockets.iterdir() if p.is_socket())) == 5:
                    break
                await asyncio.sleep(0.1)
            return private, [p for p in tmp_path.iterdir() if p.is_socket()]
        finally:
            await manager.shutdown_kernel(now=True)

    private, in_folder = asyncio.run(start_and_look())
    assert private and all(name.startswith("kernel-ipc-") for name in private) and in_folder == []
    assert sockets.stat().st_mode & 0o777 == 0o700 and tmp_path not in sockets.parents
    batch._remove_sockets()
    assert not sockets.exists()
