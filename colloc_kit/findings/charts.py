"""One figure per claim of the seed study, drawn in the kit's style from the same cells the claims are judged on
(notebook 08 shows each under its verdict; docs/findings.md shows their images, which `save_png` writes).

    >>> figures = claim_figures(cells33, cells37, fit)              # doctest: +SKIP
    >>> save_png({"claim-1": figures[0]}, "docs/img/findings")     # doctest: +SKIP
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from colloc_kit.errors import BadInput
from colloc_kit.findings.gain import CLAIMED_GAIN
from colloc_kit.findings.sharing import comparable
from colloc_kit.findings.read import ALONE, MPS, PARTITION
from colloc_kit.views import plots
from colloc_kit.views.style import TEMPLATE, colours, empty

__all__ = ["TITLES", "for_plots", "claim_figures", "versus_figure", "save_png"]

TITLES = ("1. Gain from copies, experiment 33 as the study ran it",
          "2. Copies that fit in memory, by one job's steady footprint alone",
          "3. MPS partitions (MIG's shapes) against free MPS", "4. MPS against the best other way of sharing")
PNG_WIDTH_PX = 1100  # the images of docs/findings.md: readable on a page, modest in size
CHROMIUM = Path("/usr/bin/chromium")  # Debian's; Playwright drives it (never a browser download)


def for_plots(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with `mode_label` set to their kind (a partition of part of the card named by its layout), so
    that `plots.by_mode` draws one line per way of sharing against copies."""
    part_card = (cells["kind"] == PARTITION) & (cells["copies"] == 1) & (cells["layout"] != "7g")
    label = cells["kind"].where(~part_card, "MPS partition " + cells["layout"] + " (not MIG)")
    return cells[cells["kind"] != ALONE].assign(mode_label=label)


def claim_figures(cells33: pd.DataFrame, cells37: pd.DataFrame, fit: pd.DataFrame) -> list[go.Figure]:
    """The figures of `judge.claims`, in its order: the gains of copies against the paper's 3x, the copies that
    fit in memory, MPS partitions against MPS, MPS against the best other way of sharing."""
    gains = plots.throughput_vs_copies(for_plots(cells33) if len(cells33) else cells33)
    gains.update_layout(title_text=TITLES[0])
    if gains.data:
        gains.add_hline(y=CLAIMED_GAIN, line_dash="dash", line_color="#d62728", row="all", col="all",
                        annotation_text=f"the paper: up to {CLAIMED_GAIN:.0f}x", annotation_position="top right")
    shown = fit[fit["capacity"].str.endswith(" card") | fit["capacity"].str.contains(" 1g.")] if len(fit) else fit
    memory = plots.memory_fit_figure(shown).update_layout(title_text=TITLES[1])
    return [gains, memory,
            versus_figure([cells33, cells37], PARTITION, MPS, TITLES[2]),
            versus_figure([cells33, cells37], None, MPS, TITLES[3])]


def versus_figure(cells: list[pd.DataFrame], kind: str | None, against: str, title: str) -> go.Figure:
    """Each cell that trained the same jobs both ways: its gain under `kind` (up; None: the best other way of
    sharing) against its gain under `against` (right), copies and mixes apart, with their CIs; above the diagonal
    `kind` gained more."""
    rows = []
    for frame, what in zip(cells, ("copies of one model", "mixes")):
        for key, group in comparable(frame) if len(frame) else []:
            base = group[group["kind"] == against]
            other = group[group["kind"] != against] if kind is None else group[group["kind"] == kind]
            if len(base) and len(other):
                best = other.loc[other["normalized_throughput_mean"].idxmax()]
                rows.append({"cell": key, "what": what, "x": base["normalized_throughput_mean"].iloc[0],
                             "x_ci": base["normalized_throughput_ci"].iloc[0], "y": best["normalized_throughput_mean"],
                             "y_ci": best["normalized_throughput_ci"], "kind": best["kind"]})
    if not rows:
        return empty(title, f"no cell ran both under {kind or 'another way of sharing'} and {against}")
    data = pd.DataFrame(rows)
    fig = go.Figure(layout={"title": title, "template": TEMPLATE, "height": 480,
                            "xaxis_title": f"gain under {against} (x one job alone)",
                            "yaxis_title": f"gain under {kind or 'the best other way'} (x one job alone)"})
    palette = colours(list(data["what"].unique()))
    for what, points in data.groupby("what", sort=False):
        fig.add_scatter(x=points["x"], y=points["y"], mode="markers", name=what, marker={"size": 9,
                        "color": palette[what]}, error_x={"array": points["x_ci"].fillna(0)},
                        error_y={"array": points["y_ci"].fillna(0)}, customdata=points[["cell", "kind"]],
                        hovertemplate="%{customdata[0]}<br>" + against + " %{x:.2f}, %{customdata[1]} %{y:.2f}"
                                      "<extra></extra>")
    x_ci, y_ci = data["x_ci"].fillna(0), data["y_ci"].fillna(0)  # the range holds every point and its CI
    low = min((data["x"] - x_ci).min(), (data["y"] - y_ci).min(), 1.0)
    high = max((data["x"] + x_ci).max(), (data["y"] + y_ci).max())
    low, high = low - 0.05 * (high - low), high + 0.05 * (high - low)
    fig.add_scatter(x=[low, high], y=[low, high], mode="lines", line={"dash": "dot", "color": "grey"},
                    name="equal gains", hoverinfo="skip")
    return fig.update_xaxes(range=[low, high]).update_yaxes(range=[low, high])


def save_png(figures: dict[str, go.Figure], folder: str | Path, width: int = PNG_WIDTH_PX) -> list[Path]:
    """Each figure as `<folder>/<name>.png`, drawn by Chromium (Debian's, at /usr/bin/chromium, driven by
    Playwright from the dev extra) with the plotly.js plotly ships; a palette of 256 colours keeps the files small.
    Playwright runs in a thread of its own: a notebook's kernel already runs an asyncio loop."""
    try:
        import playwright.sync_api  # noqa: F401, PLC0415 - optional: the dev extra, only for images
    except ImportError:
        raise BadInput("writing figures as images needs Playwright: pip install -e '.[dev]'") from None
    if not CHROMIUM.exists():
        raise BadInput(f"writing figures as images needs Chromium at {CHROMIUM} (apt-get install chromium)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(_draw, figures, folder, width).result()


def _draw(figures: dict[str, go.Figure], folder: Path, width: int) -> list[Path]:
    import plotly  # noqa: PLC0415 - heavy: only where images are written
    from PIL import Image  # noqa: PLC0415 - heavy: only where images are written (torchvision brings Pillow)
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - optional: the dev extra, only for images

    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 800})
        for name, fig in figures.items():
            page.set_content(f"<html><body style='margin:0'><div id='f'></div><script>{script}</script><script>"
                             f"(fig => Plotly.newPlot('f', fig.data, fig.layout, {{staticPlot: true}}))"
                             f"({fig.to_json()})</script></body></html>")  # a new page, the same JS realm
            page.wait_for_selector("#f .main-svg", state="attached")
            path = folder / f"{name}.png"
            page.locator("#f .svg-container").screenshot(path=str(path))
            Image.open(path).convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
            written.append(path)
        browser.close()
    return written
