"""The README's two set-up commands, read from its "## Set up" section at run time, so that CI runs what a newcomer
types and nothing else: `main` (the first bash block: every notebook, headless) or `tests` (the second: the suite).

    python3 .ci/readme_commands.py main     # prints the command; .ci/run runs it with bash
"""

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
NAMES = ("main", "tests")


def setup_commands(text: str) -> dict[str, str]:
    """{"main": ..., "tests": ...}: the one-line bash blocks of the README's set-up section, in order."""
    section = re.search(r"^## Set up[^\n]*\n(.*?)(?=^## )", text, re.S | re.M)
    if section is None:
        raise SystemExit("README.md has no '## Set up' section")
    blocks = [b.strip() for b in re.findall(r"^```bash\n(.*?)^```", section.group(1), re.S | re.M)]
    if len(blocks) != len(NAMES) or any("\n" in b for b in blocks):
        raise SystemExit(f"README.md's set-up section must hold {len(NAMES)} one-line bash blocks, has {blocks}")
    return dict(zip(NAMES, blocks))


if __name__ == "__main__":
    print(setup_commands(README.read_text())[sys.argv[1]])
