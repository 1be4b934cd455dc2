"""What a batch did, kept: each notebook's outcome, the batch's report, and the record a batch folder holds of it
(`index.html` for a reader, `batch.json` for a program).

    >>> BatchReport("cpu-smoke", Path("batch-runs/x"), notebooks=[]).failed
    []
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from pathlib import Path

from colloc_kit import atomic
from colloc_kit.batch.pages import FLAGGED_ONE
from colloc_kit.stats import plural

__all__ = ["OK", "FAILED", "INTERRUPTED", "NOT_RUN", "NotebookOutcome", "BatchReport", "write_record", "write_index",
           "where"]

OK, FAILED, INTERRUPTED, NOT_RUN = "ok", "failed", "interrupted", "not run"


@dataclass
class NotebookOutcome:
    """One executed notebook: where its outputs are, how long it took, and where it failed if it did."""

    name: str
    status: str
    seconds: float
    ipynb: str
    html: str | None
    parameters: dict
    error: str | None = None
    error_cell: int | None = None  # execution count of the failing cell: "In [n]" in the notebook and its HTML
    error_source: str | None = None  # the failing cell's first lines
    warnings: list[str] = field(default_factory=list)  # what the notebook printed as `notebook.warn`
    html_bytes: int = 0  # the size of its page
    summary: str = ""  # what the notebook is for, in its own first sentence
    flags: dict[str, int] = field(default_factory=dict)  # what its tables and figures flag, counted (pages.FLAGS)


@dataclass
class BatchReport:
    """What one batch did: its profile, its folder, each notebook's outcome, when, how long, on what machine.

    >>> BatchReport("cpu-smoke", Path("batch-runs/x"), notebooks=[]).failed
    []
    """

    profile: str
    folder: Path
    notebooks: list[NotebookOutcome]
    started_at: str = ""  # local date and time the batch started
    seconds: float = 0.0  # the whole batch
    host: str = ""  # the machine: name, CPU, cores
    gpus: str = ""  # its GPUs, or why there is none

    @property
    def failed(self) -> list[NotebookOutcome]:
        """The notebooks that did not run through (error, interrupted, or not run)."""
        return [n for n in self.notebooks if n.status != OK]


def write_record(report: BatchReport) -> None:
    """index.html and batch.json: what ran, what was interrupted, what never started."""
    write_index(report)
    atomic.write_json(report.folder / "batch.json", {
        "profile": report.profile, "started_at": report.started_at, "seconds": report.seconds, "host": report.host,
        "gpus": report.gpus, "notebooks": [asdict(o) for o in report.notebooks]})


def write_index(report: BatchReport) -> Path:
    """index.html: when, where and how long, then one row per notebook with its status, time, page size, warnings,
    error and links."""
    rows = []
    for n in report.notebooks:
        links = " ".join(f'<a href="{html.escape(p)}">{p.rsplit(".", 1)[1]}</a>' for p in (n.html, n.ipynb) if p)
        error = html.escape(f"{where(n)}: {n.error}\n{n.error_source or ''}" if n.error else "")
        warned = "".join(f"<li>{html.escape(w)}</li>" for w in n.warnings) + "".join(
            f"<li>{html.escape(plural(count, FLAGGED_ONE[flag], flag))}</li>" for flag, count in n.flags.items())
        rows.append(f'<tr class="{n.status}"><td>{html.escape(n.name)}<br><small>{html.escape(n.summary)}</small>'
                    f"</td><td>{n.status}</td>"
                    f"<td>{n.seconds:,.0f} s</td><td>{n.html_bytes / 1e6:.2f} MB</td><td>{links}</td>"
                    f"<td>{f'<ul class=warnings>{warned}</ul>' if warned else ''}</td><td><pre>{error}</pre></td></tr>")
    facts = {"date": report.started_at, "machine": report.host, "GPU": report.gpus, "profile": report.profile,
             "total time": f"{report.seconds:,.0f} s"}
    with_warnings = sum(bool(n.warnings or n.flags) for n in report.notebooks)
    return atomic.write_text(report.folder / "index.html", (
        "<!doctype html><html><head><meta charset='utf-8'><title>colloc-kit batch</title><style>"
        "body{font-family:sans-serif;margin:2em}td,th{padding:.3em 1em;text-align:left;vertical-align:top}"
        ".failed td{background:#fdd}pre{white-space:pre-wrap;margin:0}ul.warnings{margin:0;padding-left:1em;"
        "color:#8a4b00}</style></head><body>"
        f"<h1>colloc-kit batch: {html.escape(report.profile)}</h1><table class='facts'>"
        + "".join(f"<tr><th>{k}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts.items())
        + f"</table><p>{len(report.notebooks) - len(report.failed)} of {len(report.notebooks)} notebooks ran without "
        f"error{f', {with_warnings} with warnings or flags' if with_warnings else ''}; runs are under "
        "<code>runs/</code>.</p>"
        "<table><tr><th>notebook</th><th>status</th><th>time</th><th>page</th><th>open</th>"
        "<th>warnings and what the page flags</th><th>error</th></tr>" + "".join(rows) + "</table></body></html>"))


def where(outcome: NotebookOutcome) -> str:
    """Where a failed notebook broke: its cell's In [n], as the HTML report numbers it."""
    return f"error in cell In [{outcome.error_cell}]" if outcome.error_cell is not None else "error"
