"""The README's counts read from the repository: the course's sheets (as a word and as the rows of its table, one per
sheet and 09 beside them), the range of the numbered notebooks, the teacher row's command (as the teachers' section
gives it) and the batch pages' weights (read back from the cpu-smoke batch). A sheet or a notebook added, or a page
grown, without the README following fails here."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def teachers_section() -> str:
    return README.split("## For teachers", 1)[1].split("\n## ", 1)[0]


def test_the_course_sheets_are_counted_and_each_has_a_row():
    sheets = sorted(p.stem for p in (ROOT / "notebooks" / "course").glob("ex*.ipynb"))
    section = teachers_section()
    assert f"`notebooks/course/`, {WORDS[len(sheets)]} *predict, run, explain* sheets" in section
    rows = re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)
    assert rows == [*sheets, "../09_guess_before_you_run"], rows


def test_the_numbered_notebooks_range_is_the_folders():
    numbers = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert f"(`notebooks/[0-9][0-9]_*.ipynb`, {numbers[0]} to {numbers[-1]})" in teachers_section()


def test_the_teacher_row_starts_jupyterlab_as_the_teachers_section_does():
    """The table at the top and the teachers' own lines agree, `--allow-root` (a container's root) included."""
    (row,) = re.findall(r"^\| a teacher \| (.*) \|$", README, flags=re.MULTILINE)
    section = teachers_section()
    assert "`.venv/bin/jupyter lab " in row
    assert ("--allow-root" in row) == ("--allow-root" in section), row


WEIGHTS = re.compile(r"the pages weigh (\d+)-(\d+) KB each \(08, with the findings' figures, (\d+) KB\) beside one "
                     r"([\d.]+) MB `plotly\.min\.js` and one (\d+) KB `jupyterlab\.css`, and ([\d.]+)-([\d.]+) MB each "
                     r"with `--self-contained`")


@pytest.mark.slow  # it reads the session's cpu-smoke batch (tests/test_quick_lane.py)
def test_the_readme_page_weights_are_the_smoke_batchs(smoke):
    """The README's page weights (decimal KB and MB, as the batch's index gives them) read back from the cpu-smoke
    batch's own folder: each page within 15 % of the stated range (a page's tables and warnings vary from run to run),
    the shared plotly.js and stylesheet to the digits shown."""
    (stated,) = WEIGHTS.findall(" ".join(README.split()))
    low, high, findings_page, plotly_mb, css_kb, alone_low, alone_high = (float(v) for v in stated)
    pages = {n.name: (smoke.folder / n.html).stat().st_size / 1000 for n in smoke.notebooks}
    print({name: round(kb) for name, kb in pages.items()})
    others = [kb for name, kb in pages.items() if not name.startswith("08_")]
    assert 0.85 * low <= min(others) and max(others) <= 1.15 * high, pages
    assert abs(pages["08_seed_reproduction"] - findings_page) <= 0.15 * findings_page, pages
    assert round((smoke.folder / "plotly.min.js").stat().st_size / 1e6, 1) == plotly_mb
    assert round((smoke.folder / "jupyterlab.css").stat().st_size / 1e3) == css_kb
    shared = sum((smoke.folder / f).stat().st_size for f in ("plotly.min.js", "jupyterlab.css")) / 1e6
    # --self-contained inlines both in each page (tests/test_batch.py: plotly.js once, no script loaded from a file)
    assert abs(min(pages.values()) / 1e3 + shared - alone_low) <= 0.1
    assert abs(max(pages.values()) / 1e3 + shared - alone_high) <= 0.1
