"""Safe YAML for experiment specs: a file (or the name of a spec shipped with the kit) read into a mapping, or
BadInput saying what is wrong. At most YAML_MAX_BYTES of UTF-8, nested at most YAML_MAX_DEPTH levels, no aliases.

    >>> read_yaml("cpu-smoke")["name"]
    'cpu-smoke'
    >>> "gpu-demo" in bundled_specs()
    True
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from colloc_kit.errors import BadInput

__all__ = ["BUNDLED_DIR", "YAML_MAX_BYTES", "YAML_MAX_DEPTH", "bundled_specs", "read_yaml"]

BUNDLED_DIR = Path(__file__).parent.parent / "experiments"
YAML_MAX_BYTES = 1_000_000
YAML_MAX_DEPTH = 20


def bundled_specs() -> dict[str, Path]:
    """The experiment specs shipped with the kit, by name (e.g. 'cpu-smoke', 'exclusive-vs-naive')."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*.yaml"))}


def read_yaml(path: str | Path) -> dict:
    """The mapping in a YAML spec file (a path, or the name of a bundled spec), or BadInput saying what is wrong.

    Read safely: at most YAML_MAX_BYTES of UTF-8, nested at most YAML_MAX_DEPTH levels, no aliases (`*name`).
    """
    path = Path(path)
    if not os.path.lexists(path) and str(path) in bundled_specs():
        path = bundled_specs()[str(path)]
    text = _read_text(path)
    try:
        data = yaml.load(text, Loader=_SpecLoader) or {}
    except BadInput as exc:
        raise BadInput(f"{path}, {exc}") from None
    except ValueError as exc:  # not a YAMLError: e.g. an integer of thousands of digits, a date that does not exist
        problem = str(exc).split(";")[0][:120]
        raise BadInput(f"{path} holds a value YAML cannot read ({problem}); fix the spec") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise BadInput(f"{path} is not valid YAML: {problem[:200]}{where}; fix the spec there") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a spec is a mapping of keys (jobs, modes, copies, ...), got {type(data).__name__}; "
                       "write e.g. `jobs: [{model: resnet18}]`")
    return data


def _read_text(path: Path) -> str:
    """The UTF-8 text of the spec file `path`, at most YAML_MAX_BYTES, or BadInput saying what is wrong."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise BadInput(f"spec {path} is not a file (a folder, a pipe, ...); give the path of a YAML experiment "
                           "spec")
        with path.open("rb") as file:
            raw = file.read(YAML_MAX_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise BadInput(f"spec file {path} does not exist; give the path of a YAML experiment spec "
                       f"or the name of a bundled one ({', '.join(bundled_specs())})") from None
    except OSError as exc:
        raise BadInput(f"cannot read the spec {path}: {exc.strerror}; check its permissions") from None
    if len(raw) > YAML_MAX_BYTES:
        raise BadInput(f"{path} is larger than {YAML_MAX_BYTES:,} bytes; give a short YAML spec (jobs, modes, "
                       "copies), not data")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start}); save the spec as UTF-8 YAML") from None


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (no billion laughs) and nesting deeper than YAML_MAX_DEPTH."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """The node at this point of the document; BadInput at an alias or past YAML_MAX_DEPTH levels."""
        mark = self.peek_event().start_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        if self.check_event(yaml.AliasEvent):
            raise BadInput(f"{where}: aliases (*name) are not allowed in a spec; write the value out")
        if self.depth >= YAML_MAX_DEPTH:
            raise BadInput(f"{where}: nested deeper than {YAML_MAX_DEPTH} levels; a spec needs a few, flatten it")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
