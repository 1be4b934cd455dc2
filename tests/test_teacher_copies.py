"""Every teacher copy runs twice in a row on the CPU, as a teacher re-runs it: no table has a column with no value,
and the second run shows the same tables (the same runs reused, the shipped set still the shipped set), saying it
reused them."""

from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from colloc_kit.batch import runner as batch

SOLUTIONS = sorted((Path(__file__).resolve().parents[1] / "notebooks" / "course" / "solutions").glob("*.ipynb"))


class Tables(HTMLParser):
    """The tables of an HTML output: each a list of rows, the header first, each row a list of cell texts."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            self.cell = ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(self.cell.strip())
            self.cell = None


def tables_of(path):
    found = []
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            parser = Tables()
            parser.feed(output.get("data", {}).get("text/html", ""))
            found += [t for t in parser.tables if len(t) > 1]
    return found


def empty_columns(table):
    header, rows = table[0], table[1:]
    return [name for i, name in enumerate(header) if all(i >= len(row) or not row[i] for row in rows)]


def test_the_table_reader_finds_an_empty_column():
    parser = Tables()
    parser.feed("<table><tr><th>gain</th><th>epoch</th></tr><tr><td>1.2</td><td></td></tr></table>")
    assert empty_columns(parser.tables[0]) == ["epoch"]


@pytest.mark.slow
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_a_teacher_copy_run_twice_fills_every_column_and_keeps_its_sources(path, tmp_path, teacher_first_runs):
    """The first run is the session's (the course-sheet test reads it too); the second runs here, over its runs."""
    outcome, first, parameters = teacher_first_runs(path)
    assert outcome.status == "ok", outcome.error
    (tmp_path / "second").mkdir()
    again = batch.execute(path, parameters, tmp_path / "second")
    assert again.status == "ok", again.error
    shown = []
    for attempt, folder in (("first", first), ("second", tmp_path / "second")):
        shown.append(tables_of(folder / path.name))
        for table in shown[-1]:
            assert not empty_columns(table), f"{attempt} run: columns without a value in {table[0]}"
    assert shown[0] == shown[1], "a table's data changed between two runs of the same sheet"
    said = "".join(o.get("text", "") for c in nbformat.read(tmp_path / "second" / path.name, as_version=4).cells
                   for o in c.get("outputs", []))
    assert "reused the run of" in said or not Path(parameters["RESULTS_DIR"]).exists()
