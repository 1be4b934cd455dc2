"""An executed notebook as a page for reading, offline: the HTML report `colloc-kit batch` writes beside each notebook.

    >>> page = export_html(Path("batch-runs/x/03_naive_collocation.ipynb"), {"COPIES": [2]})   # doctest: +SKIP
    >>> warnings_of(Path("batch-runs/x/03_naive_collocation.ipynb"))                           # doctest: +SKIP
    ['identical jobs of one run differ 2.1x in images/s: ...']

A report hides the code (`show_code` keeps it), shows the parameters of the run as a small table, leaves out the
panel cells (`if INTERACTIVE:`) and the widget views (they would need a widget manager from a CDN). Its figures are
drawn by plotly.js: by default one `plotly.min.js` beside the pages of a batch folder, which every page references
(pages stay small); where that file is missing (a page copied or mailed alone) each figure's place says so and how to
mend it. `self_contained` inlines plotly.js once in the page instead: one file that works anywhere.

A notebook that failed is shown up to the failing cell, then a line saying the rest was not computed: no figure, table
or reading after it (a reading of figures that are not there would mislead). Where the failure left no error in a cell
(a kernel that died, a cell timed out by the batch) the page cuts after the last cell the kernel started and says the
error the batch saw.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from colloc_kit import atomic
from colloc_kit.notebook.setup import WARNING

__all__ = ["PLOTLY_MIME", "WIDGET_VIEW_MIME", "PLOTLY_JS", "LAB_CSS", "PANEL_CELL", "MISSING_PLOTLY", "FLAGS",
           "FLAGGED_ONE", "plotly_js", "export_html", "as_report", "navigation", "up_to_the_error", "drawable",
           "warnings_of", "flags_of", "summary_of"]

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
PLOTLY_JS = "plotly.min.js"
LAB_CSS = "jupyterlab.css"  # JupyterLab's stylesheet (about 250 KB), written once beside plotly.min.js
LAB_CSS_MARK = "<!--ck-lab-css-->"  # where the template's stylesheets start; they end before LAB_CSS_END
LAB_CSS_END = '<style type="text/css">\n/* Force rendering true colors'
FLAGS = {  # what the tables and figures flag, as the batch index counts it per notebook
    "windows under 2 s": r"common window only [\d.]+ s", "wide CIs": r"wide CI \((?:\+-|± )",
    "jobs that did not complete": r"\d+ of \d+ jobs did not complete",
    "results greyed as too noisy": r"not a result: too noisy"}
FLAGGED_ONE = {"windows under 2 s": "window under 2 s", "wide CIs": "wide CI",  # each flag as the index says one
               "jobs that did not complete": "job that did not complete",
               "results greyed as too noisy": "result greyed as too noisy"}
PANEL_CELL = "colloc_kit.panel(INTERACTIVE"  # the cell that shows the widget panel in JupyterLab; left out of reports
MISSING_PLOTLY = ("This figure is drawn by plotly.min.js, which lay beside this page in its batch folder and is "
                  "missing here. Copy plotly.min.js next to this page, or make pages that stand alone with "
                  "<code>colloc-kit batch --self-contained</code>.")
NOTICE_SCRIPT = """<script>
window.addEventListener("DOMContentLoaded", function () {
  if (typeof Plotly !== "undefined") return;
  document.querySelectorAll(".plotly-graph-div").forEach(function (div) {
    div.innerHTML = '<div class="ck-missing-plotly" style="border:2px dashed #d62728;padding:1em;margin:1em 0;'
      + 'color:#7a1c1c;background:#fff6f6;font-family:sans-serif">%s</div>';
    div.style.height = "auto";
    div.parentElement.style.height = "auto";  // plotly's wrapper holds the figure's height
  });
});
</script>"""
REPORT_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}
{%- if resources.plotly_inline -%}<script>{{ resources.plotly_inline }}</script>
{%- else -%}<script src="{{ resources.plotly_js }}"></script>{{ resources.notice }}{%- endif -%}
{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block notebook_css -%}{{ resources.lab_css_mark }}{{ super() }}{{ resources.no_word_breaks }}
{%- endblock notebook_css -%}
"""
NO_WORD_BREAKS = """<style>/* JupyterLab breaks printed lines anywhere (break-all): here only between words, and
inside a word only where it is longer than the line (a path) */
body .jp-OutputArea-output pre {word-break: normal; overflow-wrap: break-word;}</style>"""
STOPPED = ("**The notebook stopped here with an error** (above). What would have come after it, its figures, tables "
           "and its reading, was not computed.")
STOPPED_WITHOUT_OUTPUT = ("**The notebook stopped here with an error**: the batch saw\n\n```\n{error}\n```\n\nwhile "
                          "this cell ran: `{cell}`. What would have come after it, its figures, tables and its "
                          "reading, was not computed.")


def plotly_js() -> Path:
    """The plotly.js that plotly ships in its package: what the pages draw their figures with."""
    import plotly  # noqa: PLC0415 - heavy: loaded when a batch writes its report

    return Path(plotly.__file__).parent / "package_data" / PLOTLY_JS


def export_html(notebook: Path, parameters: Mapping[str, Any] | None = None, show_code: bool = False,
                self_contained: bool = False, neighbours: tuple[str | None, str | None] = (None, None),
                error: str | None = None) -> Path:
    """The executed notebook as an HTML report beside it: its figures drawn by the folder's plotly.min.js and its
    style from the folder's jupyterlab.css, or, with `self_contained`, both inlined once in the page. `parameters`:
    those of the run shown as a table; `neighbours`: the previous and next pages, linked with the index at the top
    beside a table of contents; `error`: what the batch saw fail in it (the page stops where it happened)."""
    import jinja2  # noqa: PLC0415 - HTML export, loaded when a batch writes its report
    import nbconvert  # noqa: PLC0415 - HTML export, loaded when a batch writes its report
    import nbformat  # noqa: PLC0415 - HTML export, loaded when a batch writes its report

    nb = up_to_the_error(nbformat.read(notebook, as_version=4), error)
    if not show_code:
        nb = as_report(nb, parameters or {})
    nb.cells.insert(0, navigation(nb, *neighbours))
    for cell in nb.cells:
        if "outputs" in cell:  # widget views (progress bars) need a widget manager, which would come from a CDN
            cell.outputs = [drawable(o) for o in cell.outputs if WIDGET_VIEW_MIME not in o.get("data", {})]
    nb.metadata.pop("widgets", None)
    exporter = nbconvert.HTMLExporter(template_name="lab", template_file="report.html.j2",
                                      extra_loaders=[jinja2.DictLoader({"report.html.j2": REPORT_TEMPLATE})],
                                      exclude_input=not show_code, exclude_input_prompt=not show_code,
                                      exclude_output_prompt=not show_code)
    inline = plotly_js().read_text(encoding="utf-8") if self_contained else ""
    body, _ = exporter.from_notebook_node(nb, resources={"plotly_js": PLOTLY_JS, "plotly_inline": inline,
                                                         "notice": NOTICE_SCRIPT % MISSING_PLOTLY,
                                                         "lab_css_mark": LAB_CSS_MARK,
                                                         "no_word_breaks": NO_WORD_BREAKS})
    start = body.index(LAB_CSS_MARK)
    end = body.index(LAB_CSS_END, start)
    if self_contained:
        body = body[:start] + body[start + len(LAB_CSS_MARK):]
    else:  # the same 250 KB in every page: one file beside them instead
        css = re.sub(r"</?style[^>]*>", "", body[start + len(LAB_CSS_MARK):end])
        if not (notebook.parent / LAB_CSS).exists() or (notebook.parent / LAB_CSS).read_text() != css:
            atomic.write_text(notebook.parent / LAB_CSS, css)
        body = body[:start] + f'<link rel="stylesheet" href="{LAB_CSS}">\n' + body[end:]
    return atomic.write_text(notebook.with_suffix(".html"), body)


def navigation(nb: Any, previous: str | None, following: str | None) -> Any:
    """A Markdown cell: links to the batch's index and the previous and next pages, then the page's contents (its
    second-level headings, linked by the ids JupyterLab gives them)."""
    import nbformat  # noqa: PLC0415 - HTML export, loaded when a batch writes its report

    links = ["[index](index.html)"] + ([f"[← previous]({previous})"] if previous else []) + \
        ([f"[next →]({following})"] if following else [])
    headings = [line[3:].strip() for cell in nb.cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("## ")]
    contents = " · ".join(f"[{h}](#{'-'.join(h.split())})" for h in headings)
    return nbformat.v4.new_markdown_cell(" · ".join(links) + (f"\n\n**Contents:** {contents}" if contents else ""))


def as_report(nb: Any, parameters: Mapping[str, Any]) -> Any:
    """The notebook as a report: the parameters as a table under the title; the parameters cells, the panel cells
    and code cells without output left out."""
    import nbformat  # noqa: PLC0415 - HTML export, loaded when a batch writes its report

    def kept(cell: Any) -> bool:
        tags = set(cell.metadata.get("tags", []))
        return cell.cell_type != "code" or not (tags & {"parameters", "injected-parameters"} or not cell.outputs
                                                or cell.source.lstrip().startswith(PANEL_CELL))

    cells = [c for c in nb.cells if kept(c)]
    if parameters:
        rows = "".join(f"| {k} | `{json.dumps(v)}` |\n".replace("`|", "`\\|") for k, v in parameters.items())
        table = nbformat.v4.new_markdown_cell(f"**Parameters of this run** (the rest: the notebook's own)\n\n"
                                              f"| parameter | value |\n|---|---|\n{rows}")
        first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
        cells.insert(first_code, table)
    report = nbformat.from_dict(dict(nb))
    report.cells = cells
    return report


def up_to_the_error(nb: Any, error: str | None = None) -> Any:
    """The notebook up to its first cell with an error output, then STOPPED; where no cell holds one but the run
    failed (`error`: a kernel that died), up to the last cell papermill started, then the error; the notebook
    itself where none failed.

    >>> import nbformat
    >>> cells = [nbformat.v4.new_code_cell("1"), nbformat.v4.new_markdown_cell("## Reading")]
    >>> nb = nbformat.v4.new_notebook(cells=cells)
    >>> nb.cells[0].metadata["papermill"] = {"start_time": "2026-11-28T05:00"}
    >>> [c.source[:25] for c in up_to_the_error(nb, "DeadKernelError: Kernel died").cells]
    ['1', '**The notebook stopped he']
    """
    import nbformat  # noqa: PLC0415 - HTML export, loaded when a batch writes its report

    failed = next((i for i, c in enumerate(nb.cells) if any(o.get("output_type") == "error"
                                                            for o in c.get("outputs", []))), None)
    note = STOPPED
    if failed is None and error:
        started = [i for i, c in enumerate(nb.cells) if c.metadata.get("papermill", {}).get("start_time")]
        failed = started[-1] if started else -1
        lines = nb.cells[failed].source.strip().splitlines() if started else []
        cell = (lines[0] if lines else "").replace("`", "'")
        note = STOPPED_WITHOUT_OUTPUT.format(error=error.strip(), cell=cell)
    if failed is None:
        return nb
    cut = nbformat.from_dict(dict(nb))
    cut.cells = [*nb.cells[:failed + 1], nbformat.v4.new_markdown_cell(note)]
    return cut


def drawable(output: Any) -> Any:
    """The output, a plotly figure given an HTML form that draws with the page's plotly.js."""
    import plotly.io as pio  # noqa: PLC0415 - heavy: loaded when a batch writes its report

    data = output.get("data", {})
    if PLOTLY_MIME in data and "text/html" not in data:
        data["text/html"] = pio.to_html(data[PLOTLY_MIME], include_plotlyjs=False, full_html=False, validate=False)
    return output


def flags_of(notebook: Path) -> dict[str, int]:
    """How often the executed notebook's tables and figures flag each of FLAGS (only those that occur)."""
    import nbformat  # noqa: PLC0415 - loaded when a batch reads its notebooks

    texts = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            texts.append(output.get("text", "") or data.get("text/html") or json.dumps(data.get(PLOTLY_MIME, ""))
                         or data.get("text/plain", ""))
    text = "\n".join(t if isinstance(t, str) else "".join(t) for t in texts)
    counts = {name: len(re.findall(pattern, text)) for name, pattern in FLAGS.items()}
    return {name: n for name, n in counts.items() if n}


def summary_of(notebook: Path) -> str:
    """The notebook's first sentence after its title: what it is for, for the batch index."""
    import nbformat  # noqa: PLC0415 - loaded when a batch reads its notebooks

    for cell in nbformat.read(notebook, as_version=4).cells:
        prose = " ".join(line for line in cell.source.splitlines() if line.strip() and not line.startswith("#"))
        if cell.cell_type == "markdown" and prose:
            plain = re.sub(r"\[([^\]]*)\]\([^)]*\)|[*`]", lambda m: m.group(1) or "", prose)
            return re.split(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s", plain, maxsplit=1)[0]  # not after 'e.g.'
    return ""


def warnings_of(notebook: Path) -> list[str]:
    """The warnings an executed notebook printed (lines starting with `notebook.WARNING`), each once."""
    import nbformat  # noqa: PLC0415 - loaded when a batch reads its notebooks

    lines = [line[len(WARNING):] for cell in nbformat.read(notebook, as_version=4).cells
             for output in cell.get("outputs", []) if output.get("output_type") == "stream"
             for line in output.get("text", "").splitlines() if line.startswith(WARNING)]
    return list(dict.fromkeys(lines))
