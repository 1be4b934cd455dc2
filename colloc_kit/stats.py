"""The kit's one confidence interval: the mean of some values and the half-width of its 95 % interval (Student's t).
`figures` builds every figure's CI on it, and a worker uses it to end its measured window once its throughput is
precise enough (`JobSpec.until_ci`), so the precision a window stops at is the one the figures then report.

    >>> ci95([100.0, 102.0, 98.0])
    (100.0, 4.968...)
    >>> round(relative_ci95([100.0, 102.0, 98.0]), 4)
    0.0497

And how every sentence of the kit writes one: `plus_minus(0.124)` is '± 12 %', `plural(1, "repeat")` '1 repeat'.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["CI_LEVEL", "ci95", "geometric_ci95", "relative_ci95", "plus_minus", "plural"]

CI_LEVEL = 0.95


def ci95(values: Iterable[float]) -> tuple[float, float]:
    """(mean, half-width of its 95 % confidence interval, Student's t); the half-width is NaN below two values."""
    values = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    from scipy.special import stdtrit  # noqa: PLC0415 - t.ppf's own quantile, a second cheaper than scipy.stats

    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return mean, float(stdtrit(len(values) - 1, 0.5 + CI_LEVEL / 2)) * sd / math.sqrt(len(values))


def geometric_ci95(values: Iterable[float]) -> tuple[float, float, float, float, float]:
    """For positive values that scale (a p99 from launch to launch): their geometric mean, its 95 % CI (`ci95` on the
    logarithms) and the 95 % range one more value falls in (the prediction interval: the CI's half-width times
    sqrt(n + 1)), as (mean, low, high, next low, next high); the bounds are NaN below two values.

    >>> [round(v, 1) for v in geometric_ci95([20.5, 19.3, 18.5])]
    [19.4, 17.1, 22.1, 15.0, 25.1]
    """
    logs = [math.log(float(v)) for v in values if v is not None and not math.isnan(float(v))]
    mean, half = ci95(logs)
    spread = half * math.sqrt(len(logs) + 1)
    return (math.exp(mean), math.exp(mean - half), math.exp(mean + half), math.exp(mean - spread),
            math.exp(mean + spread))


def relative_ci95(values: Iterable[float]) -> float:
    """The half-width of the values' 95 % CI as a share of their mean; NaN below two values or for a zero mean."""
    mean, half_width = ci95(values)
    return half_width / abs(mean) if mean and not math.isnan(mean) else math.nan


def plus_minus(share: float, decimals: int = 0) -> str:
    """A relative CI half-width as text: '± 12 %' (one sign for a CI everywhere, never '+-').

    >>> plus_minus(0.124), plus_minus(0.124, 1)
    ('± 12 %', '± 12.4 %')
    """
    return f"± {100 * share:.{decimals}f} %"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """'1 repeat', '3 repeats', '0 runs': the count and its noun, singular only for one.

    >>> plural(1, "lone job"), plural(2, "lone job"), plural(2, "copy", "copies")
    ('1 lone job', '2 lone jobs', '2 copies')
    """
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"
