"""In a real browser (Playwright driving Debian's Chromium), the pages people read:

- every notebook run in JupyterLab on this CPU with the cpu-smoke profile's parameters, one after another as a
  reader would (Run All Cells), reusing the runs the session's cpu-smoke batch measured, a screenshot of each; the
  batch's HTML reports of the same notebooks (under 1 MB, figures drawn offline). On both, every figure is checked
  as drawn (at most MAX_SERIES series a plot, the legend below the plot, at least 60 % of the width for the plots,
  categories in numeric order, every axis titled, every label inside the figure's box, every point and CI inside its
  plot's area) and no output reads "nan" or "None";
- a report made `--self-contained` draws alone, and a light report moved away from its plotly.min.js says so in
  each figure's place;
- notebook 03's panel (Run updates the figure, Kernel > Interrupt stops a run within 10 s and keeps it, the progress
  bar then shows the interrupt, bad input shows in the status line), and a notebook cell interrupted mid-run: its
  progress bar turns red and says so, never green at 100 %;
- none of the kit's processes (zygotes, workers) outlives the kernels once the lab is shut down.

No request leaves the machine. Screenshots go to test-artifacts/browser/ (or $COLLOC_KIT_ARTIFACTS); the README's
and docs' figures come from there. CI installs Chromium (.ci/run); where it is absent these tests are skipped.
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

import nbformat
import psutil
import pytest
from local_browser import CHROMIUM, NEEDS_CHROMIUM, local_only_page
from processes import KitWatch, stop_tree

from colloc_kit.batch import runner as batch
from colloc_kit.batch.pages import export_html
from colloc_kit.views.style import MAX_SERIES

ARTIFACTS = Path(os.environ.get("COLLOC_KIT_ARTIFACTS",
                               Path(__file__).resolve().parents[1] / "test-artifacts")) / "browser"
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_naive_collocation.ipynb"
TEACHER_EX2 = NOTEBOOK.parent / "course" / "solutions" / "ex2_sharing_modes.ipynb"
GUESS_NOTEBOOK = NOTEBOOK.parent / "09_guess_before_you_run.ipynb"
MIX_TYPO = "timm.resnt152 + timm.resnet26"
INTERRUPT_WITHIN_S = 10
SHORT_STEPS = 8  # the panel's first two Runs: 3 steps past the tiny job's 5 warm-up steps, not its 40
KIT_GRACE_S = 10  # for the kit's processes to end after the lab and its kernels: a worker leaves at its next step

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install -e '.[dev]')")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A page whose requests to any other host are aborted and recorded in `page.outside`."""
    page = local_only_page(browser, 1400, 1000)
    yield page
    page.context.close()


def shot(page, name: str) -> None:
    """The whole page as a PNG; in JupyterLab, which scrolls inside itself, the window is made as tall as the
    notebook first (at most 16,000 px)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tall = page.evaluate("() => { const s = document.querySelector('.jp-WindowedPanel-outer');"
                         " return s ? s.scrollHeight + 160 : 0; }")
    viewport = page.viewport_size
    if tall > viewport["height"]:
        page.set_viewport_size({"width": viewport["width"], "height": min(tall, 16_000)})
        page.evaluate("() => { document.querySelector('.jp-WindowedPanel-outer').scrollTop = 0; }")
        page.wait_for_timeout(500)  # plotly redraws at the new size
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.set_viewport_size(viewport)


ACTIVE = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in front (earlier ones stay open behind it)
FIGURES_JS = """root => Array.from(document.querySelector(root).querySelectorAll('.js-plotly-plot')).map(gd => {
  const L = gd._fullLayout, box = gd.getBoundingClientRect(), legend = gd.querySelector('.legend');
  const names = {}, used = new Set();  // per plot, the series a legend names (guide lines have no hover)
  (gd._fullData || []).forEach(t => {
    if (t.visible === false) return;
    used.add(t.xaxis || 'x'); used.add(t.yaxis || 'y');
    if (t.hoverinfo !== 'skip' && L.showlegend !== false) (names[t.xaxis || 'x'] ||= new Set()).add(t.name);
  });
  const series = Object.fromEntries(Object.entries(names).map(([k, v]) => [k, v.size]));
  const axes = Object.keys(L).filter(k => /^[xy]axis[0-9]*$/.test(k) && L[k].visible !== false)
    .filter(k => used.has(k.replace('axis', ''))).map(k => ({name: k, title: (L[k].title || {}).text || '',
      type: L[k].type, categories: (L[k]._categories || []).map(String)}));
  const outside = [], inside = (r, a, slack) => r.left >= a.left - slack && r.right <= a.right + slack
    && r.top >= a.top - slack && r.bottom <= a.bottom + slack;
  gd.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .gtitle, .annotation-text-g text, '
                      + '.textpoint text, .legendtext').forEach(t => {  // every label within the figure, unclipped
    const r = t.getBoundingClientRect();
    if (r.width > 0 && !inside(r, box, 1)) outside.push('label ' + JSON.stringify(t.textContent));
  });
  Object.entries(L._plots || {}).forEach(([id, p]) => {  // every point and its CI within its own plot's area
    const node = p.plot && p.plot.node ? p.plot.node() : null;
    if (!node || !p.xaxis || !p.yaxis) return;
    const area = {left: box.left + p.xaxis._offset, right: box.left + p.xaxis._offset + p.xaxis._length,
                  top: box.top + p.yaxis._offset, bottom: box.top + p.yaxis._offset + p.yaxis._length};
    node.querySelectorAll('.scatterlayer .point, .errorbar path').forEach(e => {
      const r = e.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) return;
      const point = e.closest('.errorbar') ? r : {left: (r.left + r.right) / 2, right: (r.left + r.right) / 2,
                                                    top: (r.top + r.bottom) / 2, bottom: (r.top + r.bottom) / 2};
      if (!inside(point, area, 2)) outside.push((e.closest('.errorbar') ? 'CI' : 'point') + ' off plot ' + id);
    });
  });
  return {title: (L.title || {}).text || '', series: series, axes: axes, outside: outside,
          legend: legend && L.showlegend !== false ? legend.getBoundingClientRect().top - box.top : null,
          plotBottom: L._size.t + L._size.h, plotShare: L._size.w / L.width};
})"""
OUTPUT_TEXT_JS = """root => Array.from(document.querySelector(root).querySelectorAll('.jp-OutputArea-output'))
  .filter(o => !o.querySelector('.js-plotly-plot')).map(o => o.innerText).join('\\n')"""
MISSING = {"nan", "NaN", "None", "<NA>", "NaT"}


def check_page(page, name: str, root: str = "body") -> None:
    """Every figure of the page (under `root`) as drawn, and the text of its outputs: what a reader meets."""
    figures = page.evaluate(FIGURES_JS, root)
    for fig in figures:
        where = f"{name}: {fig['title']!r}"
        assert not fig["series"] or max(fig["series"].values()) <= MAX_SERIES, (where, fig["series"])
        if fig["legend"] is not None:
            assert fig["legend"] >= fig["plotBottom"] - 1, (where, "legend beside or over the plot")
        if fig["series"]:
            assert fig["plotShare"] >= 0.6, (where, f"the plots take {fig['plotShare']:.0%} of the width")
        for axis in fig["axes"]:
            numbers = [c for c in axis["categories"] if c.replace(".", "", 1).isdigit()]
            if axis["type"] == "category" and numbers == axis["categories"] and numbers:
                assert numbers == sorted(numbers, key=float), (where, axis)
        assert any(a["title"] for a in fig["axes"] if a["name"].startswith("x")) or not fig["axes"], where
        assert not fig["outside"], (where, sorted(set(fig["outside"])))  # labels, points and CIs all drawn in full
    words = set(page.evaluate(OUTPUT_TEXT_JS, root).replace("|", " ").replace(",", " ").split())
    assert not words & MISSING, f"{name} shows {sorted(words & MISSING)} as text"
    tables = page.evaluate("root => Array.from(document.querySelector(root).querySelectorAll('.ck-table table'))"
                           ".map(t => [t.getBoundingClientRect().right, t.closest('.jp-OutputArea-output')"
                           ".getBoundingClientRect().right])", root)
    assert all(right <= bound + 1 for right, bound in tables), f"{name}: a table wider than the page"


@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_every_report_of_the_batch_is_small_and_draws_its_figures_offline_for_a_reader(smoke, page):
    for n in smoke.notebooks:
        report = smoke.folder / n.html
        assert report.stat().st_size < 1_000_000, f"{n.html}: {report.stat().st_size:,} bytes"
        figures = sum(PLOTLY in o.get("data", {}) for c in nbformat.read(smoke.folder / n.ipynb, as_version=4).cells
                      for o in c.get("outputs", []))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        drawn = page.locator(".js-plotly-plot .main-svg")
        assert drawn.count() >= figures > 0, f"{n.html}: {drawn.count()} drawn of {figures}"
        check_page(page, n.html)
        shot(page, f"report-{n.name}")
    assert page.outside == []


@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_a_self_contained_report_draws_alone_and_a_light_one_moved_alone_says_why_it_cannot(smoke, page, tmp_path):
    (n,) = [n for n in smoke.notebooks if n.name.startswith("03")]
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(smoke.folder / n.ipynb, alone / n.ipynb)
    whole = export_html(alone / n.ipynb, {}, self_contained=True)
    page.goto(whole.as_uri())
    page.wait_for_load_state("load")
    assert page.locator(".js-plotly-plot .main-svg").count() >= 3 and page.locator(".ck-missing-plotly").count() == 0
    moved = tmp_path / "moved.html"
    shutil.copy(smoke.folder / n.html, moved)  # mailed alone: its plotly.min.js stayed behind
    page.goto(moved.as_uri())
    page.wait_for_load_state("load")
    notices = page.locator(".ck-missing-plotly")
    assert notices.count() >= 3 and "colloc-kit batch --self-contained" in notices.first.inner_text()
    shot(page, "report-without-plotly-js")
    assert page.outside == []


@pytest.mark.timeout(1200)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_notebooks_07_on_the_h100_split_and_08_on_the_h200_set_read_well_and_their_figures_are_shot(smoke, page,
                                                                                                 tmp_path):
    """The two pages with the most series: 07 on the shipped H100 split (its folder holds no runs), and 08's findings
    on the shipped H200 set (its default `DATA`). Their main figures and the findings page are what docs/img shows
    (figure-*.png, findings-page.png)."""
    (analysis,) = [nb for nb in sorted(batch.default_notebooks_dir().glob(batch.NOTEBOOK_GLOB)) if nb.stem[:2] == "07"]
    shutil.copy(batch.plotly_js(), tmp_path / batch.PLOTLY_JS)
    outcome = batch.execute(analysis, {**batch.BATCH_PARAMETERS, "RESULTS_DIR": str(tmp_path / "none")}, tmp_path)
    assert outcome.status == "ok", outcome.error
    (findings,) = [n for n in smoke.notebooks if n.name.startswith("08")]
    for report, figures in ((tmp_path / outcome.html, {"figure-07-gain": "Throughput gain from collocation"}),
                            (smoke.folder / findings.html, {"figure-08-gain": "1. Gain from copies",
                                                            "figure-08-epoch-time": "Epoch time of each job"})):
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        check_page(page, report.name)
        for name, title in figures.items():
            figure = page.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text=title)).first
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            figure.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "findings-page.png"))  # the top of 08: the verdicts, the first figure
    assert page.outside == []


PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 over a folder holding: every notebook with the cpu-smoke profile's parameters
    (`every/`), notebook 03 with INTERACTIVE = True (`panel/`), and a notebook whose cell runs until interrupted."""
    pytest.importorskip("jupyterlab", reason="needs JupyterLab (pip install -e '.[dev]')")
    root = tmp_path_factory.mktemp("lab")
    (root / "panel").mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    set_parameters(nb, {"INTERACTIVE": True, "COPIES": [1, 2]})
    nbformat.write(nb, root / "panel" / NOTEBOOK.name)
    nbformat.write(interrupted_notebook(), root / "panel" / "interrupt.ipynb")
    (root / "course").mkdir()
    shutil.copy(TEACHER_EX2, root / "course" / TEACHER_EX2.name)
    nb = nbformat.read(GUESS_NOTEBOOK, as_version=4)
    set_parameters(nb, {"MIX": MIX_TYPO})
    nbformat.write(nb, root / "course" / GUESS_NOTEBOOK.name)
    for extension, name, values in (("notebook-extension", "tracker", {"windowingMode": "none"}),  # every cell drawn
                                    ("apputils-extension", "notification", {"fetchNews": "false"})):  # no pop-up
        settings = root / ".settings" / "@jupyterlab" / extension
        settings.mkdir(parents=True)
        (settings / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    log = open(root / "jupyterlab.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
         f"--LabApp.user_settings_dir={root / '.settings'}", f"--LabApp.workspaces_dir={root / '.workspaces'}",
         "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, cwd=root)
    watch = KitWatch(server.pid)  # the kit's processes that the kernels' runs start
    try:
        _wait_for(f"http://127.0.0.1:{port}/api/status?token={token}", server)
        yield {"url": lambda path: f"http://127.0.0.1:{port}/lab/workspaces/{re.sub(r'[^a-z0-9]', '-', path)}"
                              f"/tree/{path}?token={token}", "root": root}  # a workspace of its own: no tabs restored
    finally:
        stop_tree(server, spare=watch.saw)  # and the kernels, should the server not have shut them down
        left = watch.survivors(grace_s=KIT_GRACE_S)
        said = [_described(proc) for proc in left]
        for proc in left:  # ours: ended before the assertion, so that they cannot starve the tests after this one
            proc.kill()
        log.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "jupyterlab.log", ARTIFACTS / "jupyterlab.log")
    assert not said, f"the kit's processes outlived their kernels (killed now): {said}"


def _described(proc) -> str:
    try:
        return f"{proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:120]}"
    except psutil.Error:  # it ended just now
        return f"{proc.pid} (ended)"


def set_parameters(nb, values: dict) -> None:
    """Give the parameters cell these values (each assignment replaced whole, over as many lines as it spans), as a
    teacher editing it would."""
    (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    lines = params.source.splitlines()
    for node in reversed(ast.parse(params.source).body):  # from the bottom: line numbers above stay right
        name = node.targets[0].id
        if name in values:
            lines[node.lineno - 1:node.end_lineno] = [f"{name} = {values[name]!r}"]
    params.source = "\n".join(lines)
    assert set(values) <= {n.targets[0].id for n in ast.parse(params.source).body}, "a parameter the cell lacks"


def interrupted_notebook():
    """A notebook whose second cell trains two tiny CPU jobs for much longer than the test waits."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "import colloc_kit\nfrom colloc_kit import notebook\n\n"
        "setup = notebook.prepare('cpu', ['smallcnn'], {**notebook.TINY_CPU_JOB, 'steps': 100000})"),
        nbformat.v4.new_code_cell("colloc_kit.run([{**setup.job, 'model': 'smallcnn'}], mode='naive', copies=[1, 2], "
                                  "out='runs', name='interrupted')")]
    return nb


@pytest.mark.timeout(1800)  # the session's cpu-smoke batch runs in the first test that asks for it
def test_every_notebook_runs_in_jupyterlab_on_this_cpu_and_reads_well(smoke, lab, page):
    """The cpu-smoke batch's notebooks, with its parameters, beside a copy of the runs the session's batch measured:
    each notebook's runs are the batch's, reused as a reader's second Run All reuses them (the batch's tests hold
    their measuring), so this test is about JupyterLab running and drawing each notebook."""
    runs = shutil.copytree(smoke.folder / "runs", lab["root"] / "every" / "runs")
    measured = sorted(runs.rglob("manifest.json"))
    for notebook, values in batch.plan("cpu-smoke", batch.load_profiles(), batch.default_notebooks_dir()):
        nb = nbformat.read(notebook, as_version=4)
        set_parameters(nb, {k: v for k, v in values.items() if k != "PLOTLY_RENDERER"})
        nbformat.write(nb, lab["root"] / "every" / notebook.name)
    for i, path in enumerate(sorted((lab["root"] / "every").glob(batch.NOTEBOOK_GLOB))):
        try:  # the lab loaded once, with the first; each next one opened in it
            run_all(page, lab["url"](f"every/{path.name}"), path=f"every/{path.name}" if i else None)
            errors = page.locator(f"{ACTIVE} .jp-OutputArea-output", has_text="Traceback")
            assert errors.count() == 0, f"{path.name}: {errors.first.inner_text()[:500]}"
            check_page(page, path.name, ACTIVE)
            assert page.locator(f"{ACTIVE} .js-plotly-plot .main-svg").count() >= 1, f"{path.name} drew no figure"
            shot(page, f"lab-{path.stem}")
        except BaseException:
            shot(page, f"lab-{path.stem}-failed")
            raise
        _menu(page, "Kernel", "Shut Down Kernel")
        _close(page)  # the next one opens alone
    assert sorted(runs.rglob("manifest.json")) == measured, "a notebook measured again instead of reusing the batch's"
    assert page.outside == []


def run_all(page, url: str, timeout_s: float = 600, path: str | None = None) -> None:
    """Open the notebook (given its `path`, in the lab the page shows, by File > Open from Path as a reader opens the
    next one: not a reload of the whole app), wait for its kernel, Run All Cells, and wait until every code cell has
    run (its prompt numbered). A kernel dialog may come late on a busy machine: it is answered whenever it shows."""
    if path:
        _menu(page, "File", "Open from Path")
        page.locator(".jp-Dialog input").fill(path)
        page.locator(".jp-Dialog button", has_text="Open").click()
    else:
        page.goto(url)
    page.locator(f"{ACTIVE} .jp-Notebook").wait_for(timeout=60_000)
    status = page.locator(".jp-StatusBar-Left")  # "Python 3 (ipykernel) | Idle" once the kernel is up
    _wait_until(lambda: _answer_kernel_dialog(page) or "| Idle" in status.inner_text(), 180)
    prompts = page.locator(f"{ACTIVE} .jp-CodeCell .jp-InputPrompt")
    before = [t.strip() for t in prompts.all_inner_texts()]  # a second Run All: every prompt numbered anew
    _menu(page, "Run", "Run All Cells")
    errors = page.locator(f"{ACTIVE} .jp-OutputArea-output", has_text="Traceback")  # Run All stops at an error
    _wait_until(lambda: _answer_kernel_dialog(page) or errors.count() > 0
                or _all_run(prompts.all_inner_texts(), before), timeout_s)


def _all_run(prompts: list[str], before: list[str]) -> bool:
    """Whether every code cell has run: its prompt numbered, and (the same cells as before Run All) numbered anew."""
    now = [t.strip() for t in prompts]
    return all(re.fullmatch(r"\[\d+\]:", t) for t in now) and (
        len(now) != len(before) or all(t != was for t, was in zip(now, before)))


def _answer_kernel_dialog(page) -> bool:
    """Take the kernel JupyterLab offers (this Python's) where it asks; False (nothing to answer) otherwise."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and dialog.locator("button", has_text="Select").count():
        dialog.locator("button", has_text="Select").click()
        dialog.wait_for(state="detached")
    return False


def test_a_notebook_cell_interrupted_mid_run_ends_with_a_red_bar_that_says_so(lab, page):
    """After Kernel > Interrupt the bar of the interrupted run once stayed green at 100 %."""
    page.goto(lab["url"]("panel/interrupt.ipynb"))
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    _accept_kernel_dialog(page)
    _menu(page, "Run", "Run All Cells")
    bar = page.locator(".widget-hprogress .progress-bar").last
    page.locator(".widget-html-content", has_text="steady").last.wait_for(timeout=120_000)
    _menu(page, "Kernel", "Interrupt Kernel")
    page.locator(".jp-OutputArea-output", has_text="interrupted: the jobs were stopped").wait_for(timeout=30_000)
    classes = bar.get_attribute("class")
    assert "progress-bar-danger" in classes and "progress-bar-success" not in classes, classes
    assert page.locator(".widget-html-content", has_text="interrupted; what was measured is kept").count() == 1
    shot(page, "lab-interrupted-cell")
    _menu(page, "Kernel", "Shut Down Kernel")
    assert page.outside == []


def test_the_panel_of_notebook_03_runs_stops_on_kernel_interrupt_and_shows_errors(lab, page):
    try:
        drive_the_panel(lab, page)
    except BaseException:
        shot(page, "lab-failed")
        raise
    assert page.outside == []


def drive_the_panel(lab, page):
    page.goto(lab["url"](f"panel/{NOTEBOOK.name}"))
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    _accept_kernel_dialog(page)
    _menu(page, "Run", "Run All Cells")
    panel_run = page.locator("button.jupyter-button", has_text="Run").first
    panel_run.wait_for(timeout=180_000)  # the notebook's own tiny CPU runs come first
    status = page.locator(".widget-html-content", has_text="press Run").first
    status.wait_for(timeout=30_000)
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")  # the panel comes before the sweep: let Run All end
    _wait_until(lambda: all(re.fullmatch(r"\[\d+\]:", t.strip()) for t in prompts.all_inner_texts()), 300)
    assert page.locator(".widget-html-content", has_text="press Run to measure").count() == 1  # the results' place
    shot(page, "lab-1-panel")

    _field(page, "steps").fill(str(SHORT_STEPS))  # these Runs are asserted by their statuses and repeats, not rates
    _field(page, "steps").press("Enter")
    panel_run.click()  # the tiny CPU job: 1 and 2 copies
    page.locator(".widget-html-content", has_text="done:").first.wait_for(timeout=180_000)
    figure = page.locator(".widget-vbox .js-plotly-plot").last  # the panel's results figure, last of the panel
    assert page.locator(".widget-html-content", has_text="press Run to measure").count() == 0
    _wait_until(lambda: figure.locator(".scatterlayer .trace").count() >= 1, 30)
    shot(page, "lab-2-after-run")

    runs = lab["root"] / "panel" / "runs" / "03-naive-panel"
    panel_run.click()  # the same settings again: measured again, a new repeat of each cell
    page.locator(".widget-html-content", has_text="running").first.wait_for(timeout=30_000)
    page.locator(".widget-html-content", has_text="done:").first.wait_for(timeout=180_000)
    complete = [m for m in runs.rglob("manifest.json") if json.loads(m.read_text())["status"] == "complete"]
    assert len(complete) == 4, f"two runs of each of copies 1 and 2 in the folder, found {len(complete)}"
    said = page.locator(".widget-html-content", has_text="done:").first.inner_text()
    assert "Run 2 measured 3 jobs as repeat 2 of naive x1, x2" in said, said  # this Run's jobs, not a running total
    shot(page, "lab-2b-run-again-measured")

    _field(page, "steps").fill("100000")
    _field(page, "steps").press("Enter")
    start_a_long_run(page, panel_run, runs)
    stopped_at = time.monotonic()
    page.locator("button.jupyter-button", has_text="Stop").first.click()  # the panel's own Stop
    page.locator(".widget-html-content", has_text="interrupted").first.wait_for(timeout=INTERRUPT_WITHIN_S * 1000)
    assert time.monotonic() - stopped_at < INTERRUPT_WITHIN_S
    live = page.locator("text.gtitle", has_text="Live:").first  # the stopped run (the fifth), as far as it got
    _wait_until(lambda: "run 5" in live.text_content() and "waiting" not in live.text_content(), 10)
    shot(page, "lab-2c-stopped")

    start_a_long_run(page, panel_run, runs)
    interrupted_at = time.monotonic()
    _menu(page, "Kernel", "Interrupt Kernel")
    page.locator(".widget-html-content", has_text="interrupted").first.wait_for(timeout=INTERRUPT_WITHIN_S * 1000)
    assert time.monotonic() - interrupted_at < INTERRUPT_WITHIN_S
    statuses = [json.loads(m.read_text())["status"] for m in runs.rglob("manifest.json")]
    assert "interrupted" in statuses  # the run is kept, marked interrupted
    bar = page.locator(".widget-hprogress", has_text="runs").locator(".progress-bar")
    _wait_until(lambda: "progress-bar-warning" in bar.get_attribute("class"), 5)  # its own widget: drawn just after
    assert "progress-bar-success" not in bar.get_attribute("class")  # not green: interrupted
    shot(page, "lab-3-interrupted")

    page.locator(".widget-dropdown", has_text="batch size").locator("select").select_option("256")
    _field(page, "steps").fill("8")
    _field(page, "steps").press("Enter")
    panel_run.click()
    error = page.locator(".widget-html-content", has_text="not run").first
    error.wait_for(timeout=60_000)
    assert "BadInput: synthetic_samples (128) is smaller than one batch (256)" in error.inner_text()
    assert "raise synthetic_samples or lower batch_size" in error.inner_text() and "Traceback" not in error.inner_text()
    shot(page, "lab-4-error")


def start_a_long_run(page, panel_run, runs):
    """Press the panel's Run and wait until this Run's jobs have started (the earlier runs' jobs started too)."""
    earlier = set(runs.rglob("*.events.jsonl"))
    panel_run.click()
    page.locator(".widget-html-content", has_text="running").first.wait_for(timeout=30_000)
    _wait_until(lambda: any('"start"' in p.read_text() for p in set(runs.rglob("*.events.jsonl")) - earlier), 120)


def test_the_ex2_teacher_table_is_filled_on_a_second_run_all(lab, page):
    path = f"course/{TEACHER_EX2.name}"
    for again in (None, path):  # the second Run All in the same kernel reuses the sheet's runs
        run_all(page, lab["url"](path), path=again)  # the second: in the same tab, as a teacher runs it again
    table = page.locator(f"{ACTIVE} .ck-table").last  # the sheet's last table: the H100's, shipped with the kit
    rows = [[c.strip() for c in r] for r in table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.textContent))")]
    assert rows and all(all(cells) for cells in rows), rows  # every gain and epoch time filled, both runs the H100's
    assert page.locator(f"{ACTIVE} .jp-OutputArea-output", has_text="reused the run of").count() >= 1
    shot(page, "lab-ex2-teacher-second-run")
    _menu(page, "Kernel", "Shut Down Kernel")


def test_a_typo_in_09s_mix_is_one_line_naming_mix(lab, page):
    page.goto(lab["url"](f"course/{GUESS_NOTEBOOK.name}"))
    page.locator(f"{ACTIVE} .jp-Notebook").wait_for(timeout=60_000)
    _accept_kernel_dialog(page)
    _menu(page, "Run", "Run All Cells")
    said = page.locator(f"{ACTIVE} .jp-OutputArea-output", has_text=f"MIX = '{MIX_TYPO}'")
    said.wait_for(timeout=180_000)
    assert "BadInput" in said.inner_text() and "Traceback" not in said.inner_text()
    assert len(said.inner_text().strip().splitlines()) == 1, said.inner_text()
    shot(page, "lab-09-mix-typo")
    _menu(page, "Kernel", "Shut Down Kernel")


def _accept_kernel_dialog(page) -> None:
    """JupyterLab may ask which kernel to start for the notebook; take the one offered (this Python's) whenever it
    asks, until the notebook's kernel is up ("| Idle" in the status bar). Awaited, not a fixed 10-s wait for a
    dialog that mostly never comes."""
    status = page.locator(".jp-StatusBar-Left")
    _wait_until(lambda: _answer_kernel_dialog(page) or "| Idle" in status.inner_text(), 180)


def _close(page) -> None:
    """Close the notebook in front; where JupyterLab asks to save its outputs, they are discarded."""
    _menu(page, "File", "Close Tab")
    discard = page.locator(".jp-Dialog button", has_text="Discard")
    _wait_until(lambda: _click_if_shown(discard) or not page.locator(ACTIVE).count(), 30)


def _click_if_shown(button) -> bool:
    if button.count():
        button.click()
    return False


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def _field(page, description: str):
    return page.locator(".widget-inline-hbox", has_text=description).locator("input").first


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, server: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert server.poll() is None, "JupyterLab exited at start; see its log"
        try:
            with urlopen(url, timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"JupyterLab did not answer on {url} in {timeout_s} s"
            time.sleep(0.5)


def _wait_until(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.2)
