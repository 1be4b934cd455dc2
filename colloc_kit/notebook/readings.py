"""A page's reading in sentences made from its own numbers: each sentence carries the relation it states and the two
numbers it names, so that a test can check every sentence against what it shows.

    >>> said = compare("resnet18 at batch 64: torch's peak", 991.0, "the steady footprint", 1934.0, " MB")
    >>> print(said)
    resnet18 at batch 64: torch's peak (991 MB) is smaller than the steady footprint (1,934 MB)
    >>> said.relation, said.holds()
    ('smaller', True)

A relation is "larger", "smaller" or "within" (the two numbers differ by at most `within`, a share of the second, or
by a CI's half-width where the sentence gives one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["Said", "relation_of", "compare", "workloads", "peak_against_steady", "rate_by_batch", "mix_totals",
           "mix_line", "show", "WORDS"]

WORDS = {"larger": "is larger than", "smaller": "is smaller than", "within": "is within {within} of"}


@dataclass(frozen=True)
class Said:
    """One sentence of a reading: `text` states `relation` between `left` and `right` (within `within`, a share of
    `right`, or `half_width` where it is given)."""

    text: str
    relation: str
    left: float
    right: float
    within: float = 0.05
    half_width: float | None = None

    def holds(self) -> bool:
        """Whether the numbers bear out the relation the sentence states."""
        return relation_of(self.left, self.right, self.within, self.half_width) == self.relation

    def __str__(self) -> str:
        return self.text


def relation_of(left: float, right: float, within: float = 0.05, half_width: float | None = None) -> str:
    """"within" where `left` and `right` differ by at most `half_width` (or `within` x `right`), else larger/smaller.

    >>> relation_of(991, 1934), relation_of(1.75, 1.0, half_width=0.2), relation_of(1.1, 1.0, half_width=0.2)
    ('smaller', 'larger', 'within')
    """
    margin = half_width if half_width is not None else within * abs(right)
    if abs(left - right) <= margin:
        return "within"
    return "larger" if left > right else "smaller"


def compare(what: str, left: float, than: str, right: float, unit: str = "", within: float = 0.05,
            digits: int = 0) -> Said:
    """`what (left) is larger than / smaller than / within 5 % of than (right)`, the relation read off the numbers."""
    relation = relation_of(left, right, within)
    verb = WORDS[relation].format(within=f"{within:.0%}".replace("%", " %"))
    return Said(f"{what} ({left:,.{digits}f}{unit}) {verb} {than} ({right:,.{digits}f}{unit})", relation, left, right,
                within)


def workloads(alone: pd.DataFrame, keys: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """The rows of `alone` by `keys` and the settings that differ between its runs (precision, image size, data
    set), each with a label that names those settings: a mean over runs of unlike settings would mislead."""
    varied = [c for c in ("amp", "image_size", "dataset") if c in alone and alone[c].nunique() > 1]
    groups = alone.groupby([*keys, *varied]) if not alone.empty else []
    return [(", ".join([" at batch ".join(str(k) for k in key[:len(keys)])]
                       + [f"{c.replace('_', ' ')} {v}" for c, v in zip(varied, key[len(keys):])]), rows)
            for key, rows in groups]


def peak_against_steady(jobs: pd.DataFrame) -> list[Said]:
    """Per workload run alone: torch's peak memory against its steady footprint (NVML's, the CUDA context included),
    averaged over its runs; none where the steady footprint was not measured (a CPU)."""
    columns = ["peak_memory_mb", "steady_gpu_memory_mb"]
    if jobs.empty or not set(columns) <= set(jobs) or jobs["steady_gpu_memory_mb"].isna().all():
        return []
    alone = jobs[jobs["copies"] == 1].dropna(subset=columns)
    return [compare(f"{label}: torch's peak", rows["peak_memory_mb"].mean(), "the steady footprint",
                    rows["steady_gpu_memory_mb"].mean(), " MB") for label, rows in
            workloads(alone, ["model", "batch_size"])]


def rate_by_batch(jobs: pd.DataFrame) -> list[Said]:
    """Per model run alone at more than one batch size: its images/s at the largest batch against the smallest."""
    alone = jobs[(jobs["copies"] == 1) & jobs["images_per_s"].notna()] if not jobs.empty else jobs
    said = []
    for label, rows in workloads(alone, ["model"]):
        rates = rows.groupby("batch_size")["images_per_s"].mean()
        if len(rates) > 1:
            said.append(compare(f"{label}: images/s at batch {rates.index[-1]}", rates.iloc[-1],
                                f"at batch {rates.index[0]}", rates.iloc[0]))
    return said


def mix_totals(summary: pd.DataFrame) -> list[Said]:
    """Per mode that shares the GPU: its total work against the jobs one after another (1), with its CI where the
    summary has one (a total whose CI holds 1 is "within" it)."""
    said = []
    shared = summary[summary["mode"] != "exclusive"] if "mode" in summary else summary
    for row in shared.dropna(subset=["normalized_throughput_mean"]).itertuples():
        total, ci = row.normalized_throughput_mean, getattr(row, "normalized_throughput_ci", None)
        ci = None if ci is None or pd.isna(ci) else float(ci)
        relation = relation_of(total, 1.0, half_width=ci if ci is not None else 0.05)
        shown = f"{total:.2f}x" + (f" ± {ci:.2f}" if ci is not None else "")
        words = {"larger": "more work than", "smaller": "less work than",
                 "within": "the same work, within its CI, as" if ci is not None else "within 5 % of"}[relation]
        said.append(Said(f"{row.mode_label}: {shown} in total, {words} the jobs one after another (1)", relation,
                         total, 1.0, half_width=ci if ci is not None else 0.05))
    return said


def mix_line(label: str, jobs_of_mode: pd.DataFrame) -> str:
    """Each job's share of its alone speed under one mode, as percentages: the range, then each job's."""
    shares = jobs_of_mode["relative_throughput"]
    each = ", ".join(f"{j.model} (batch {j.batch_size}) {j.relative_throughput:.0%}"
                     for j in jobs_of_mode.itertuples())
    return f"{label}: each job ran at {shares.min():.0%} to {shares.max():.0%} of its alone speed ({each})"


def show(said: Sequence[Said | str], none: str) -> None:
    """Each sentence on a line of its own; `none` where there is none to say."""
    print("\n".join(str(s) for s in said) if said else none)
