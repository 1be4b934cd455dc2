"""What a verdict holds, for every claim's rule: the cells that decided it (experiment, workload, way of sharing,
copies, gain ± CI) with what each showed, those set aside and why, and the claim's scope; and the two steps every
rule takes: comparing gains by their 95 % CIs (`ahead`), and settling a verdict where some cells are too imprecise
to decide (`settle`: a cell that could change the verdict makes it "cannot tell", it is never dropped).

    >>> cell = Cell("seed-33", "resnet26 on cifar10", "MPS", 3, 1.84, 1.16)
    >>> cell.text(), round(cell.high, 2)
    ('seed-33 resnet26 on cifar10 MPS x3: 1.84 ± 1.16 x', 3.0)
    >>> settle(lambda seen: "agrees" if "clears" in seen else "disagrees", ["below"], [("clears", "below")])
    'cannot tell'
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

__all__ = ["AGREES", "PARTLY", "DISAGREES", "CANNOT_TELL", "NOT_MEASURED", "VERDICTS", "Cell", "Decision", "ahead",
           "settle", "verdict", "listed", "grouped", "noise_by_claim"]

AGREES, PARTLY, DISAGREES, CANNOT_TELL = "agrees", "partly", "disagrees", "cannot tell"
NOT_MEASURED = "not measured here"  # the data holds no cell of the kind the claim is about (e.g. no MIG run)
VERDICTS = (AGREES, PARTLY, DISAGREES, CANNOT_TELL, NOT_MEASURED)


@dataclass(frozen=True)
class Cell:
    """One measured cell as a verdict names it; `ci` is the 95 % CI's half-width (NaN: unknown)."""

    experiment: str
    workload: str
    kind: str
    copies: int
    value: float
    ci: float
    layout: str = ""

    @classmethod
    def of(cls, row: pd.Series, workload: str | None = None) -> Cell:
        """The cell of a row of `read.configurations` (its gain: normalized throughput)."""
        ci = row.get("normalized_throughput_ci")
        return cls(str(row.get("experiment", "")), workload or str(row["workloads"]), str(row["kind"]),
                   int(row["copies"]), float(row["normalized_throughput_mean"]), float(ci) if _number(ci) else math.nan,
                   str(row.get("layout") or ""))

    @property
    def known(self) -> bool:
        """Whether its gain and CI are both known (a cell without a CI cannot decide a comparison)."""
        return not (math.isnan(self.value) or math.isnan(self.ci))

    @property
    def low(self) -> float:
        """The gain's 95 % CI's lower bound (NaN where the CI is unknown)."""
        return self.value - self.ci

    @property
    def high(self) -> float:
        """The gain's 95 % CI's upper bound (NaN where the CI is unknown)."""
        return self.value + self.ci

    def text(self) -> str:
        """'seed-33 resnet26 on cifar10 MPS partition (not MIG) 2g+2g+2g x3: 1.71 ± 1.08 x'."""
        gain = f"{self.value:.2f} ± {self.ci:.2f} x" if self.known else f"{self.value:.2f} x (no CI)"
        where = f" {self.layout}" if self.layout else ""
        return f"{self.experiment} {self.workload} {self.kind}{where} x{self.copies}: {gain}"


@dataclass(frozen=True)
class Decision:
    """Cells and what they showed under a rule ('spans 3x', 'behind MPS partition (not MIG)'), or why they were set
    aside."""

    cells: tuple[Cell, ...]
    outcome: str

    def text(self) -> str:
        """'seed-34 r50 MPS x7: 1.74 ± 0.04 x against seed-34 r50 MPS partition (not MIG) x7: ... (MPS behind ...)'."""
        return f"{' against '.join(c.text() for c in self.cells)} ({self.outcome})"


def ahead(a: Cell, b: Cell) -> bool | None:
    """Whether a's gain is ahead of b's beyond both 95 % CIs (a's lower bound above b's upper bound); None where a CI
    is unknown and the means alone would say it.

    >>> ahead(Cell("e", "w", "MPS partition (not MIG)", 7, 1.84, 0.05), Cell("e", "w", "MPS", 7, 1.74, 0.04))
    True
    """
    if a.known and b.known:
        return a.low > b.high
    return None if a.value > b.value else False


def settle(rule: Callable[[list[str]], str], seen: list[str], undecided: list[tuple[str, str]]) -> str:
    """The verdict `rule` gives the decided outcomes `seen`, where each undecided cell could show either of its two
    outcomes: the same verdict whichever way they fall, else "cannot tell". The rules count outcomes (monotone), so
    it suffices to let all undecided cells of one pair of outcomes fall the same way."""
    kinds = list(dict.fromkeys(undecided))
    verdicts = set()
    for choice in itertools.product((0, 1), repeat=len(kinds)):
        falls = {kind: kind[side] for kind, side in zip(kinds, choice)}
        verdicts.add(rule(seen + [falls[u] for u in undecided]))
    return verdicts.pop() if len(verdicts) == 1 else CANNOT_TELL


def verdict(claim: str, said: str, shows: str, rule: str, scope: str, decided: list[Decision] | None = None,
            set_aside: list[Decision] | None = None, evidence: list[str] | None = None) -> dict[str, Any]:
    """A claim's verdict as `judge.claims` returns it: the verdict, what the data shows, the rule, the scope, the
    decisions that decided it and those set aside, and further evidence lines."""
    return {"claim": claim, "verdict": said, "shows": shows, "rule": rule, "scope": scope,
            "decided": decided or [], "set_aside": set_aside or [], "evidence": evidence or []}


def _number(value: object) -> bool:
    return value is not None and not isinstance(value, str) and bool(pd.notna(value))


def listed(decisions: list[Decision], where: str, shown: int = 4) -> str:
    """The decisions in words, those whose outcome is rarest first (a cell behind among many ahead is the one to
    read), the first `shown` of them and how many more `where` lists."""
    counts = Counter(d.outcome for d in decisions)
    texts = [d.text() if d.cells else d.outcome for d in sorted(decisions, key=lambda d: counts[d.outcome])]
    more = f"; and {len(texts) - shown} more ({where})" if len(texts) > shown else ""
    return "; ".join(texts[:shown]) + more


def grouped(claim: dict[str, Any]) -> list[str]:
    """A claim's decisions and cells set aside, one line per outcome: 'decided, MPS best (42): a against b; ...'."""
    lines = []
    for what, decisions in (("decided", claim.get("decided", [])), ("set aside", claim.get("set_aside", []))):
        groups: dict[str, list[Decision]] = {}
        for d in decisions:
            groups.setdefault(d.outcome, []).append(d)
        lines += [f"{what}, {outcome} ({len(ds)}): " + "; ".join(" against ".join(c.text() for c in d.cells)
                                                                for d in ds) if any(d.cells for d in ds)
                  else f"{what}: {outcome}" for outcome, ds in groups.items()]
    return lines


def noise_by_claim(noise: str | None) -> dict[int, str]:
    """The noise warning split to the claims it bears on: an imprecise lone run or an impossible gain on claim 1
    (gains against alone), repeats that differ on claims 3 and 4 (ways of sharing against each other).

    >>> noise_by_claim("repeats of one cell differ 1.69x in images/s (x): noise; run more repeats; the lone run of r26 "
    ...                "is known only to +-63 %: noise")[1]
    'the lone run of r26 is known only to +-63 %: noise'
    """
    out: dict[int, list[str]] = {}
    for part in re.split(r"; (?=repeats of one cell|the lone run of)", noise or ""):
        for number in ((3, 4) if part.startswith("repeats of one cell") else (1,)) if part else ():
            out.setdefault(number, []).append(part)
    return {number: "; ".join(parts) for number, parts in out.items()}
