"""The batch profiles (profiles.yaml): the parameters a profile gives every notebook that declares them, and
`notebooks: {stem: {...}}` for one notebook. Read without the notebook machinery, so that the CLI names them cheaply.

    >>> sorted(load_profiles())[:2]
    ['cpu-smoke', 'gpu-quick']
"""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["PROFILES_FILE", "load_profiles"]

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")


def load_profiles(path: Path = PROFILES_FILE) -> dict[str, dict]:
    """Profile name -> its notebook parameters.

    >>> load_profiles()["cpu-smoke"] is not None
    True
    """
    return yaml.safe_load(Path(path).read_text())
