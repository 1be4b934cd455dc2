"""In a real browser (Playwright driving Debian's Chromium): MLflow's UI comparing two cells that `colloc-kit export
mlflow` wrote from the shipped H100 seed runs (2 x ResNet-26 under naive and under MPS): their throughput and GPU
series over the cell's seconds, and their figures as bars, equal to `load()`'s. No request leaves the machine.

The screenshot goes to test-artifacts/mlflow-browser/ (or $COLLOC_KIT_ARTIFACTS); docs/img/mlflow-compare.png is one.
Where Chromium, Playwright or MLflow is absent these tests are skipped with the reason.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
from local_browser import CHROMIUM, NEEDS_CHROMIUM, local_only_page

import colloc_kit
from colloc_kit.tracking import log as mlflow_log

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("COLLOC_KIT_ARTIFACTS", ROOT / "test-artifacts")) / "mlflow-browser"
RUNS = ROOT / "benchmarks" / "results" / "h100" / "seed" / "seed-runs.tgz"  # the raw runs of reference set h100-80gb
BASELINE, PAIR = "20261122-230325-exclusive-x1-r0", ("20261122-230557-naive-x2-r0", "20261122-230721-mps-x2-r0")
CHARTS = ("interval/images_per_s", "gpu/sm_util_pct", "gpu/power_w", "aggregate_images_per_s",
          "normalized_throughput", "energy_per_image_j")
CELLS, COLORS = "tags.`colloc_kit.kind` = 'cell'", ("#1f77b4", "#d62728")

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]


@pytest.fixture(scope="module")
def two_cells(tmp_path_factory, mlflow_uri):
    """The two cells (and their lone baseline) unpacked from the shipped runs, written to the session's real MLflow
    server."""
    tracking = pytest.importorskip("mlflow.tracking", reason="needs MLflow (pip install -e '.[mlflow]' or '.[dev]')")
    MlflowClient = tracking.MlflowClient
    root = tmp_path_factory.mktemp("mlflow-ui")
    with tarfile.open(RUNS) as archive:
        wanted = [m for m in archive.getmembers() if m.name.startswith(
            tuple(f"runs/seed-33/{name}" for name in (BASELINE, *PAIR, "machines")))]
        archive.extractall(root, members=wanted, filter="data")
    results = colloc_kit.load(root / "runs" / "seed-33")
    exported = mlflow_log.export(results, mlflow_uri, "h100-naive-vs-mps", only=set(PAIR))
    assert sorted(exported.created) == sorted(PAIR)
    client, experiment = MlflowClient(mlflow_uri), exported.experiments["h100-naive-vs-mps"]
    for run, color in zip(client.search_runs([experiment], CELLS), COLORS):  # the UI's colour per run, as a user
        client.set_tag(run.info.run_id, "mlflow.runColor", color)            # picks it (else a hash of its id)
    return mlflow_uri, experiment, results.runs.set_index("run_id").loc[list(PAIR)]


@pytest.fixture
def page():
    """A Chromium page whose requests to any other host are aborted and recorded in `page.outside`."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install -e '.[dev]')")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield local_only_page(browser, 1400, 1480)
        browser.close()


def test_mlflows_ui_compares_two_cells_with_their_series_and_figures(two_cells, page):
    uri, experiment, runs = two_cells
    page.goto(f"{uri}/#/experiments/{experiment}/runs?compareRunsMode=CHART")
    search = page.get_by_placeholder("Search metric charts")
    search.wait_for(timeout=90_000)
    for panel in ("Close", "Toggle sidebar"):  # MLflow's assistant and its sidebar, where this version has them
        button = page.get_by_role("button", name=panel)
        if button.count():
            button.first.click()
    search.fill("^(" + "|".join(CHARTS) + ")$")
    for chart in CHARTS:
        page.get_by_text(chart, exact=True).first.wait_for(timeout=60_000)
    for run in runs.itertuples():  # each cell in the list, its aggregate throughput on its bar, as load() reads it
        assert page.get_by_text(f"{run.mode_label} x2 r0: 2 x timm.resnet26", exact=False).count() >= 1
        page.get_by_text(f"{run.aggregate_images_per_s:.2f}", exact=True).first.wait_for(timeout=30_000)
    page.wait_for_timeout(1500)  # the line charts finish drawing
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mlflow-compare.png"))
    assert page.outside == []
