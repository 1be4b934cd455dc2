"""What an experiment spec's `baselines:` may ask for, and how precise each baseline should be (`ExperimentSpec`'s
`baselines`, `baseline_precision`, `baseline_max_repeats`; `pipeline.cells` plans them, `analysis.attribution` uses
them). Each is a lone run in the same experiment:

- `configured`: one job as the spec configures it (the study's baseline);
- `host-matched`: one job given the loader workers the N jobs of a collocated cell had together (N x workers);
- `gpu-only`: the same jobs on device-resident synthetic data, alone and in each cell's mode and copies.

    >>> check_baselines(["configured", "host-matched"], {"host-matched": 0.05}, 6)
    >>> check_baselines(["host-match"], {}, None)                     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    colloc_kit.errors.BadInput: baselines: unknown 'host-match' (did you mean 'host-matched'?); valid: ...
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any

from colloc_kit.errors import BadInput

__all__ = ["BASELINES", "SEED_PRECISION", "BaselineKeys", "baseline_keys", "check_baselines"]

BASELINES = ("configured", "host-matched", "gpu-only")
# the seed specs' targets (issue 38): the configured one leaves the cell's own CI room inside the study's gain's +-10 %
# (sqrt(10^2 - 9^2): +-4.4 %; at +-10 % the gain would miss its target by any CI of the cell's own)
SEED_PRECISION = {"host-matched": 0.05, "gpu-only": 0.05, "configured": 0.09}


@dataclass(frozen=True)
class BaselineKeys:
    """`ExperimentSpec`'s keys for its lone baselines (keyword-only: they follow its own fields), checked when built.

    >>> BaselineKeys(baselines=["gpu-only"], baseline_precision={"gpu-only": 0.05}).baseline_max_repeats is None
    True
    """

    baselines: list[str] = field(default_factory=list, kw_only=True)  # the lone baselines the plan adds
    baseline_precision: dict = field(default_factory=dict, kw_only=True)  # {baseline: CI half-width / mean}
    baseline_max_repeats: int | None = field(default=None, kw_only=True)  # most lone runs of one (None: repeats)

    def __post_init__(self) -> None:
        check_baselines(self.baselines, self.baseline_precision, self.baseline_max_repeats)


def baseline_keys(source: Any) -> dict:
    """The three keys of `source` (an experiment or a seed spec) as a spec mapping holds them.

    >>> baseline_keys(BaselineKeys(baselines=["configured"]))["baselines"]
    ['configured']
    """
    return {"baselines": list(source.baselines), "baseline_precision": dict(source.baseline_precision),
            "baseline_max_repeats": source.baseline_max_repeats}


def check_baselines(baselines: Any, precision: Any, max_repeats: Any) -> None:
    """BadInput (one line, what to write instead) unless the three keys are well formed."""
    if not isinstance(baselines, list):
        raise BadInput(f"baselines is a list such as [{', '.join(BASELINES)}], got {str(baselines)[:60]}")
    named = [*baselines, *(precision if isinstance(precision, dict) else {})]
    for name in named:
        if name not in BASELINES:
            close = difflib.get_close_matches(str(name), BASELINES, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise BadInput(f"baselines: unknown '{str(name)[:40]}'{hint}; valid: {', '.join(BASELINES)}")
    if not isinstance(precision, dict) or not all(_share(v) for v in precision.values()):
        raise BadInput("baseline_precision maps a baseline to a target CI half-width as a share of its mean, "
                       f"e.g. {{host-matched: 0.05}}; got {str(precision)[:60]}")
    if max_repeats is not None and not (isinstance(max_repeats, int) and not isinstance(max_repeats, bool)
                                        and max_repeats > 0):
        raise BadInput(f"baseline_max_repeats is a positive number of lone runs, got {str(max_repeats)[:60]}")


def _share(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 < value < 1
