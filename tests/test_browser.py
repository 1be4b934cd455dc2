"""In a real browser (Playwright driving Debian's Chromium): notebook 03 in JupyterLab with its panel on the CPU (Run
updates the figure, Kernel > Interrupt stops a run within 10 s and keeps it, bad input shows in the status line),
and the batch's HTML reports (under 1 MB, figures drawn offline). No request leaves the machine.

Screenshots go to test-artifacts/browser/ (or $COLLOC_KIT_ARTIFACTS). CI installs Chromium (.ci/run); where it is
absent these tests are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

import nbformat
import psutil
import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("COLLOC_KIT_ARTIFACTS",
                               Path(__file__).resolve().parents[1] / "test-artifacts")) / "browser"
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_naive_collocation.ipynb"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
INTERRUPT_WITHIN_S = 10

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium; .ci/run installs it in CI)"),
]


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
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []

    def only_local(route):
        url = urlparse(route.request.url)
        if url.scheme in ("file", "data", "blob") or url.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()
    page.outside = outside
    yield page
    context.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_every_report_of_the_batch_is_small_and_draws_its_figures_offline(smoke, page):
    for n in smoke.notebooks:
        report = smoke.folder / n.html
        assert report.stat().st_size < 1_000_000, f"{n.html}: {report.stat().st_size:,} bytes"
        figures = sum(PLOTLY in o.get("data", {}) for c in nbformat.read(smoke.folder / n.ipynb, as_version=4).cells
                      for o in c.get("outputs", []))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        drawn = page.locator(".js-plotly-plot .main-svg")
        assert drawn.count() >= figures > 0, f"{n.html}: {drawn.count()} drawn of {figures}"
        shot(page, f"report-{n.name}")
    assert page.outside == []


PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 over a folder holding notebook 03 with INTERACTIVE = True (on this CPU)."""
    pytest.importorskip("jupyterlab", reason="needs JupyterLab (pip install -e '.[dev]')")
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    params.source = params.source.replace("INTERACTIVE = False", "INTERACTIVE = True") \
        .replace("COPIES = [1, 2, 4, 7]", "COPIES = [1, 2]")
    assert "INTERACTIVE = True" in params.source and "COPIES = [1, 2]" in params.source
    nbformat.write(nb, root / NOTEBOOK.name)
    port, token = _free_port(), secrets.token_hex(16)
    log = open(root / "jupyterlab.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
         "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, cwd=root)
    try:
        _wait_for(f"http://127.0.0.1:{port}/api/status?token={token}", server)
        yield {"url": f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK.name}?token={token}", "root": root}
    finally:
        children = psutil.Process(server.pid).children(recursive=True) if server.poll() is None else []
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        for child in children:  # the kernel, should the server not have shut it down
            if child.is_running():
                child.kill()
        log.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "jupyterlab.log", ARTIFACTS / "jupyterlab.log")


def test_the_panel_of_notebook_03_runs_stops_on_kernel_interrupt_and_shows_errors(lab, page):
    try:
        drive_the_panel(lab, page)
    except BaseException:
        shot(page, "lab-failed")
        raise
    assert page.outside == []


def drive_the_panel(lab, page):
    page.goto(lab["url"])
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    _accept_kernel_dialog(page)
    _menu(page, "Run", "Run All Cells")
    panel_run = page.locator("button.jupyter-button", has_text="Run").first
    panel_run.wait_for(timeout=180_000)  # the notebook's own tiny CPU runs come first
    status = page.locator(".widget-html-content", has_text="press Run").first
    status.wait_for(timeout=30_000)
    figure = page.locator(".js-plotly-plot").last
    assert "press Run to measure" in figure.inner_text()
    shot(page, "lab-1-panel")

    panel_run.click()  # the tiny CPU job: 1 and 2 copies
    page.locator(".widget-html-content", has_text="done:").first.wait_for(timeout=180_000)
    assert "press Run to measure" not in figure.inner_text()
    assert figure.locator(".scatterlayer .trace").count() >= 1
    shot(page, "lab-2-after-run")

    _field(page, "steps").fill("100000")
    _field(page, "steps").press("Enter")
    panel_run.click()
    page.locator(".widget-html-content", has_text="running").first.wait_for(timeout=30_000)
    runs = lab["root"] / "runs" / "03-naive-panel"
    _wait_until(lambda: any('"start"' in p.read_text() for p in runs.rglob("*.events.jsonl")), 120)
    interrupted_at = time.monotonic()
    _menu(page, "Kernel", "Interrupt Kernel")
    page.locator(".widget-html-content", has_text="interrupted").first.wait_for(timeout=INTERRUPT_WITHIN_S * 1000)
    assert time.monotonic() - interrupted_at < INTERRUPT_WITHIN_S
    statuses = [json.loads(m.read_text())["status"] for m in runs.rglob("manifest.json")]
    assert "interrupted" in statuses  # the run is kept, marked interrupted
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


def _accept_kernel_dialog(page) -> None:
    """JupyterLab may ask which kernel to start for the notebook; take the one offered (this Python's)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: PLC0415 - optional: the browser tests skip without it

    dialog = page.locator(".jp-Dialog")
    try:
        dialog.wait_for(timeout=10_000)
    except PlaywrightTimeout:
        return
    dialog.locator("button", has_text="Select").click()
    dialog.wait_for(state="detached")


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
