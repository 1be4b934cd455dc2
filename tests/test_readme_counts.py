"""The README's counts read from the repository: the course's sheets (as a word and as the rows of its table, one per
sheet and 09 beside them) and the range of the numbered notebooks. A sheet or a notebook added without the README
following fails here."""

import re
from pathlib import Path

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
