"""Every repository path the prose cites exists: README.md, docs/, the notebooks (markdown and code), the READMEs of
benchmarks/results/ and of the shipped reference sets, and the docstrings and comments of benchmarks/ and
colloc_kit/. A cited path is a backticked or linked one in Markdown (and any in source text) that starts with a
top-level folder of the repository; `*` in it is a glob; in source text, a file a script would write into
an existing folder (a default `--out`) counts. Module paths (`.py` under colloc_kit/) are left out: the
package's layout is checked by the architecture test."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = r"(?:benchmarks|docs|notebooks|colloc_kit|tests)/"
PATH = TOP + r"[\w.*=+/-]*"
IN_MARKDOWN = re.compile(r"`(" + PATH + r")|\]\((" + PATH + r")\)")  # `path...` or [text](path)
IN_SOURCE = re.compile(r"(?<![\w./$-])(" + PATH + r")")  # not after a word, a dot, a slash or $ (shell variables)


def texts():
    """(file, text) for each file whose prose is checked; a notebook's text is its cells' sources."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
                 *sorted((ROOT / "benchmarks").rglob("*.md")),
                 *sorted((ROOT / "colloc_kit").rglob("*.md")), *sorted((ROOT / "notebooks").rglob("*.md"))]:
        yield path, path.read_text(), IN_MARKDOWN
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" not in path.parts:
            cells = json.loads(path.read_text())["cells"]
            yield path, "\n".join("".join(cell["source"]) for cell in cells), IN_MARKDOWN
    for path in [*sorted((ROOT / "benchmarks").rglob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.sh")),
                 *sorted((ROOT / "colloc_kit").rglob("*.py"))]:
        yield path, path.read_text(), IN_SOURCE


def cited(text: str, pattern: re.Pattern) -> list[str]:
    found = (next(g for g in m.groups() if g) for m in pattern.finditer(text))
    return [p.rstrip(".,:;") for p in found]


def missing(path: str, output: bool = False) -> bool:
    """Whether `path` names nothing in the repository; with `output` (source text, where a default --out may name
    a file a script writes into its committed folder) its folder existing is enough."""
    if path.endswith(".py") and path.startswith("colloc_kit/"):
        return False  # a module path: the architecture test's concern, and they move between sub-packages
    if "*" in path:
        return not any(ROOT.glob(path))
    return not ((ROOT / path).exists() or output and "." in Path(path).name and (ROOT / path).parent.is_dir())


def broken_citations() -> list[str]:
    return [f"{file.relative_to(ROOT)}: {path}" for file, text, pattern in texts()
            for path in cited(text, pattern) if missing(path, output=pattern is IN_SOURCE)]


def test_every_cited_repository_path_exists():
    assert broken_citations() == []


def test_a_missing_path_is_caught():
    markdown = "runs in `benchmarks/results/h100/matrix/runs.tgz` and [the page](docs/no-such-page.md)."
    source = 'default=Path("benchmarks/results/nowhere/out.json")  # see docs/benchmarks.md, $out/x'
    assert [p for p in cited(markdown, IN_MARKDOWN) if missing(p)] == ["docs/no-such-page.md"]
    assert [p for p in cited(source, IN_SOURCE) if missing(p, output=True)] == ["benchmarks/results/nowhere/out.json"]
    assert not missing("benchmarks/results/h100/start-skew/new.json", output=True)
    assert missing("benchmarks/results/h100/start-skew/new.json")
    assert not missing("colloc_kit/moved_elsewhere.py") and missing("notebooks/00_*.ipynb")
