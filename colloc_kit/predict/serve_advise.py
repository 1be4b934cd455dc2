"""The safe share: which sharing setting serves an inference job within its SLO with the most training beside it.

From runs with an inference job (`role: serve`; figures from `colloc_kit.analysis.latency`), `run_rows` makes a row
per run: the served model and rate, the training mix beside it ("resnet50 x2"), the setting (mode and its options),
the training images/s and the inference p99 with its CI, and whether the p99 met the SLO. `frontier` makes a row per
setting from them (`by_setting`): a setting launched several times (`ExperimentSpec.repeats`) gives its p99 over its
launches, with a CI and the range one more launch falls in, because a p99 moves from launch to launch more than one
window's CI says. `choose` answers "serve X at R req/s with p99 <= S ms beside these training jobs": of the shared
settings measured for that question, the one within S with the most training (measured; this module predicts
nothing: a question with no run is answered with the spec that measures it, `sweep_spec`). `confirm_spec` repeats
the chosen setting, to check it holds.

    >>> table = frontier(reference_or_runs)                                   # doctest: +SKIP
    >>> advice = choose(table, "resnet50", rate_per_s=150, slo="25ms", beside="resnet50 x2")   # doctest: +SKIP
    >>> advice.row["mode_label"], advice.source                                # doctest: +SKIP
    ('mps(thread_percentage=100+50+50)', 'measured')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from colloc_kit.analysis.latency import ci_words
from colloc_kit.analysis.results import Results
from colloc_kit.errors import BadInput
from colloc_kit.serving import SERVE, slo_ms
from colloc_kit.spec import ExperimentSpec, JobSpec, ModeSpec
from colloc_kit.stats import geometric_ci95

__all__ = ["FRONTIER_COLUMNS", "LAUNCH_COLUMNS", "Advice", "Confirmation", "SETTINGS", "by_setting", "choose",
           "confirm_spec", "confirmation", "frontier", "launches_met", "mix_label", "normal_mix", "p99_words",
           "run_rows", "sweep_spec"]

SETTINGS = [ModeSpec("naive"), ModeSpec("mps"), *(ModeSpec("mps", {"thread_percentage": [100, *[share] * 8]})
                                                  for share in (25, 50, 75))]  # what `sweep_spec` measures
MIX_PART = re.compile(r"\s*(?:(?P<before>\d+)\s*x\s+)?(?P<model>[\w.\-]+?)(?:\s+x\s*(?P<after>\d+))?\s*")
FRONTIER_COLUMNS = ["served", "rate_per_s", "concurrency", "slo_ms", "mix", "mode", "mode_label", "copies",
                    "train_images_per_s", "latency_p50_ms", "latency_p99_ms", "latency_p99_ms_lo",
                    "latency_p99_ms_hi", "requests_per_s", "slo_share", "shared", "run_id", "experiment",
                    "requests_in_window", "window_s"]  # the last two: how many requests the p99 and its CI rest on
SETTING_KEYS = ["served", "rate_per_s", "concurrency", "slo_ms", "mix", "mode", "mode_label", "copies", "shared",
                "experiment"]  # the runs of one setting: its launches
LAUNCH_COLUMNS = ["launches", "p99_ci_from", "next_p99_ms_lo", "next_p99_ms_hi", "launch_p99s_ms"]


def mix_label(models: list[str]) -> str:
    """The training beside an inference job as 'model x n + ...', e.g. 'resnet50 x2'.

    >>> mix_label(["resnet50", "vit_b_16", "resnet50"])
    'resnet50 x2 + vit_b_16 x1'
    """
    counts = pd.Series(models, dtype=object).value_counts().sort_index()
    return " + ".join(f"{model} x{n}" for model, n in counts.items()) if len(counts) else "nothing"


def run_rows(results: Results, slo: str | None = None) -> pd.DataFrame:
    """A row per run with an inference job (see the module); `slo` replaces each job's own SLO for `within_slo`."""
    jobs = results.jobs
    if jobs.empty or "role" not in jobs or not (jobs["role"] == SERVE).any():
        return pd.DataFrame(columns=[*FRONTIER_COLUMNS, "within_slo", "repeat"])
    runs = results.runs.set_index("run_id")
    rows = []
    for run_id, group in jobs.groupby("run_id", sort=False):
        serving = group[group["role"] == SERVE]
        if serving.empty:
            continue
        job = serving.iloc[0]
        run = runs.loc[run_id]
        rows.append({"served": job["model"], "rate_per_s": job.get("rate_per_s"),
                     "concurrency": job.get("concurrency"), "slo_ms": slo_ms(slo) if slo else job.get("slo_ms"),
                     "mix": mix_label(list(group.loc[group["role"] != SERVE, "model"])), "mode": run["mode"],
                     "mode_label": run["mode_label"], "copies": run["copies"],
                     "train_images_per_s": run.get("train_images_per_s"),
                     **{k: job.get(k) for k in FRONTIER_COLUMNS[9:15]},
                     "shared": not bool(run["sequential"]) and len(group) > 1, "run_id": run_id,
                     "experiment": run["experiment"], "requests_in_window": job.get("requests_in_window"),
                     "window_s": job.get("window_s"), "repeat": run.get("repeat")})
    table = pd.DataFrame(rows, columns=[*FRONTIER_COLUMNS, "repeat"])
    table["within_slo"] = table["latency_p99_ms"] <= table["slo_ms"]
    return table


def frontier(results: Results, slo: str | None = None) -> pd.DataFrame:
    """A row per setting measured (`by_setting` of `run_rows`): what notebook 10, the frontier and `choose` read."""
    return by_setting(run_rows(results, slo))


def by_setting(rows: pd.DataFrame) -> pd.DataFrame:
    """A row per setting of `run_rows`'s rows, its launches (its runs: `repeats`) pooled. With two launches or more
    the p99 is their geometric mean, `latency_p99_ms_lo`/`_hi` its 95 % CI over the launches and `next_p99_ms_lo`/
    `_hi` the 95 % range one more launch's p99 falls in (`stats.geometric_ci95`); with one launch they are the run's
    p99 and its window's CI, and no range (one launch says nothing of the next). `p99_ci_from` says which; the training
    images/s, requests/s and share within the SLO are the launches' means, the p50 their median, `requests_in_window`
    the fewest any launch's p99 rests on, `launch_p99s_ms` each launch's p99 (a tuple, in the order they ran).

    >>> rows = pd.DataFrame({"served": "resnet50", "rate_per_s": 38.5, "concurrency": None, "slo_ms": 25.0,
    ...     "mix": "resnet50 x1", "mode": "mps", "mode_label": "mps", "copies": 1, "shared": True, "experiment": "e",
    ...     "train_images_per_s": [2090.0, 2120.0, 2100.0], "latency_p50_ms": [9.0, 9.5, 9.2],
    ...     "latency_p99_ms": [20.5, 19.3, 18.5], "latency_p99_ms_lo": 18.0, "latency_p99_ms_hi": 22.0,
    ...     "requests_per_s": 38.0, "slo_share": 1.0, "run_id": ["a", "b", "c"], "requests_in_window": 470,
    ...     "window_s": 12.0})
    >>> row = by_setting(rows).iloc[0]
    >>> int(row["launches"]), row["p99_ci_from"], float(round(row["latency_p99_ms"], 1)), row["run_id"]
    (3, '3 launches', 19.4, 'a b c')
    >>> [round(float(row[f"{c}_p99_ms_{end}"]), 1) for c in ("latency", "next") for end in ("lo", "hi")]
    [17.1, 22.1, 15.0, 25.1]
    """
    columns = [*FRONTIER_COLUMNS, "within_slo", *LAUNCH_COLUMNS]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    settings = [_setting(runs) for _, runs in rows.groupby(SETTING_KEYS, sort=False, dropna=False)]
    table = pd.DataFrame(settings, columns=columns)
    table["within_slo"] = table["latency_p99_ms"] <= table["slo_ms"]
    return table


def _setting(runs: pd.DataFrame) -> dict:
    """`by_setting`'s row of one setting's runs."""
    first = runs.iloc[0]
    p99 = runs["latency_p99_ms"].dropna().astype(float)
    row = {**{key: first[key] for key in SETTING_KEYS}, "launches": len(runs),
           "train_images_per_s": runs["train_images_per_s"].mean(), "latency_p50_ms": runs["latency_p50_ms"].median(),
           "requests_per_s": runs["requests_per_s"].mean(), "slo_share": runs["slo_share"].mean(),
           "run_id": " ".join(map(str, runs["run_id"])), "requests_in_window": runs["requests_in_window"].min(),
           "window_s": runs["window_s"].min(), "launch_p99s_ms": tuple(float(v) for v in p99)}
    if len(p99) < 2:
        return {**row, **{key: first[key] for key in ("latency_p99_ms", "latency_p99_ms_lo", "latency_p99_ms_hi")},
                "p99_ci_from": "one window", "next_p99_ms_lo": math.nan, "next_p99_ms_hi": math.nan}
    mean, low, high, next_low, next_high = geometric_ci95(p99)
    return {**row, "latency_p99_ms": mean, "latency_p99_ms_lo": low, "latency_p99_ms_hi": high,
            "p99_ci_from": f"{len(p99)} launches", "next_p99_ms_lo": next_low, "next_p99_ms_hi": next_high}


@dataclass(frozen=True)
class Advice:
    """The answer: the chosen setting's row (`frontier`; None: no measured setting met the SLO), where it comes from,
    the best training any measured setting within the SLO gave, and the rows it was chosen from."""

    row: pd.Series | None
    source: str
    candidates: pd.DataFrame
    alone_p99_ms: float | None = None  # the served job's p99 alone at this rate, where it was measured

    @property
    def text(self) -> str:
        """The answer in one line: the setting, its training, its p99 with the CI, the SLO, measured or not."""
        if self.row is None:
            target = float(self.candidates["slo_ms"].iloc[0]) if len(self.candidates) else math.nan
            none = "no measured shared setting kept the p99 within the SLO"
            if self.alone_p99_ms is None or math.isnan(self.alone_p99_ms):
                return f"{none}; its p99 alone was not measured: measure it alone, or more settings"
            if self.alone_p99_ms <= target:
                return f"{none}: serve alone (alone its p99 is {self.alone_p99_ms:.1f} ms <= {target:g} ms)"
            return (f"{none}, nor serving alone: alone its p99 is {self.alone_p99_ms:.1f} ms against {target:g} ms; "
                    "a lower rate, a looser SLO or a faster card")
        r = self.row
        met, launches = launches_met(r, r["slo_ms"])
        held = f"; {met} of {launches} launches within it" if launches > 1 else ""
        return (f"{r['mode_label']}: training {r['train_images_per_s']:.0f} images/s beside it, p99 "
                f"{r['latency_p99_ms']:.1f} ms ({p99_words(r)}) <= {r['slo_ms']:g} ms{held} ({self.source})")


def launches_met(row: pd.Series, target_ms: float) -> tuple[int, int]:
    """How many of a setting's launches (a `frontier` row's `launch_p99s_ms`) had a p99 within `target_ms`, and how
    many launches there were; (0, 0) for a row without them.

    >>> launches_met(pd.Series({"launch_p99s_ms": (19.6, 36.6, 19.1)}), 25.0)
    (2, 3)
    """
    launches = row.get("launch_p99s_ms")
    if not isinstance(launches, tuple):
        return 0, 0
    return sum(p99 <= target_ms for p99 in launches), len(launches)


def p99_words(row: pd.Series) -> str:
    """A setting's p99 (a `frontier` row) in words: over its launches, with the range of one more, or one window's.

    >>> p99_words(pd.Series({"p99_ci_from": "3 launches", "latency_p99_ms_lo": 17.0, "latency_p99_ms_hi": 22.2,
    ...                      "next_p99_ms_lo": 14.9, "next_p99_ms_hi": 25.4}))
    'geometric mean of 3 launches, 95 % CI 17.0-22.2; one more launch 14.9-25.4'
    >>> p99_words(pd.Series({"p99_ci_from": "one window", "latency_p99_ms_lo": 17.0, "latency_p99_ms_hi": 22.2}))
    'one launch, 95 % CI 17.0-22.2'
    """
    ci = ci_words(row["latency_p99_ms_lo"], row["latency_p99_ms_hi"])
    if row.get("p99_ci_from", "one window") == "one window":
        return f"one launch, {ci}"
    return (f"geometric mean of {row['p99_ci_from']}, {ci}; one more launch {row['next_p99_ms_lo']:.1f}-"
            f"{row['next_p99_ms_hi']:.1f}")


def choose(table: pd.DataFrame, served: str, rate_per_s: float, slo: str, beside: str) -> Advice:
    """The shared setting with the most training among those measured for this question whose p99 met `slo`;
    BadInput (exit 2) where the table holds no run of the question, naming what it holds."""
    target = slo_ms(slo)
    asked = table[(table["served"] == served) & (table["mix"] == normal_mix(beside)) & table["shared"]
                  & (table["rate_per_s"].astype(float) - rate_per_s).abs().le(1e-9)]
    if asked.empty:
        held = sorted({f"{r.served} at {r.rate_per_s:g}/s beside {r.mix}" for r in table.itertuples()
                       if r.shared and isinstance(r.rate_per_s, (int, float)) and not math.isnan(r.rate_per_s)})
        raise BadInput(f"no measured run serves {served} at {rate_per_s:g} requests/s beside {normal_mix(beside)}; "
                       f"measured: {'; '.join(held[:6]) or 'none'}; run `colloc-kit advise --serve ... --confirm 1` "
                       "to measure its settings (sweep_spec)")
    asked = asked.assign(slo_ms=target, within_slo=asked["latency_p99_ms"] <= target)  # the asked SLO, not the runs'
    within = asked[asked["within_slo"]].sort_values("train_images_per_s", ascending=False)
    alone = table[(table["served"] == served) & ~table["shared"].astype(bool)
                  & (table["rate_per_s"].astype(float) - rate_per_s).abs().le(1e-9)]["latency_p99_ms"].dropna()
    return Advice(within.iloc[0] if len(within) else None, "measured", asked,
                  float(alone.mean()) if len(alone) else None)


@dataclass(frozen=True)
class Confirmation:
    """What the repeats of a chosen setting (`confirm_spec`) said: how many ran, the share whose p99 met the SLO, their
    mean training images/s over the best measured within the SLO, and the share whose p99 lay inside the range the
    advice gave for it (`against`: where the setting ran two launches or more, the range one more launch falls in,
    `by_setting`; else the chosen run's 95 % CI, one window's, which a repeat often leaves; NaN where it lacks a
    bound). `held`: the first two at their targets; the third is reported with its target."""

    runs: int
    within_slo: float
    training_kept: float
    within_ci: float
    against: str = "the chosen run's 95 % CI"

    TARGETS: ClassVar[dict[str, float]] = {"within_slo": 0.9, "training_kept": 0.8, "within_ci": 0.9}

    @property
    def held(self) -> bool:
        """Whether the repeats met the SLO and kept the training at their targets."""
        return self.within_slo >= self.TARGETS["within_slo"] and self.training_kept >= self.TARGETS["training_kept"]

    def line(self, setting: str) -> str:
        """One line for a reader.

        >>> for part in Confirmation(3, 1.0, 0.99, 2 / 3).line("mps").split(", "): print(part)
        3 run(s) of mps: within the SLO in 100 % (target 90 %)
        training 99 % of the best within the SLO (target 80 %)
        p99 inside the chosen run's 95 % CI in 67 % (target 90 %)
        """
        target = {name: _share(share) for name, share in self.TARGETS.items()}
        agreed = (f"{self.against}: no bound to agree within" if math.isnan(self.within_ci) else
                  f"p99 inside {self.against} in {_share(self.within_ci)} (target {target['within_ci']})")
        return (f"{self.runs} run(s) of {setting}: within the SLO in {_share(self.within_slo)} (target "
                f"{target['within_slo']}), training {_share(self.training_kept)} of the best within the SLO (target "
                f"{target['training_kept']}), {agreed}")


def confirmation(advice: Advice, repeated: pd.DataFrame) -> Confirmation:
    """`Confirmation` of `advice` (a chosen setting) from the rows of its repeats (`run_rows`, a row per repeat)."""
    if advice.row is None or not len(repeated):
        raise BadInput("nothing confirmed: no chosen setting, or no repeat of it ran")
    best = advice.candidates.loc[advice.candidates["within_slo"], "train_images_per_s"].max()
    row = advice.row
    if pd.notna(row.get("next_p99_ms_lo")):
        low, high = row["next_p99_ms_lo"], row["next_p99_ms_hi"]
        against = f"the 95 % range of one more launch ({row['p99_ci_from']})"
    else:
        low, high, against = row["latency_p99_ms_lo"], row["latency_p99_ms_hi"], Confirmation.against
    within_ci = (float(repeated["latency_p99_ms"].between(low, high).mean()) if pd.notna(low) and pd.notna(high)
                 else math.nan)
    return Confirmation(len(repeated), float(repeated["within_slo"].mean()),
                        float(repeated["train_images_per_s"].mean() / best) if best > 0 else math.nan, within_ci,
                        against)


def sweep_spec(serve: JobSpec, training: list[tuple[JobSpec, int]], name: str, modes: list[ModeSpec] | None = None
               ) -> ExperimentSpec:
    """An experiment measuring `serve` beside `training` (job, copies) under every setting (exclusive first: the lone
    baselines), training groups with equal copies; the inference job listed first takes the first share."""
    copies = {n for _, n in training}
    if len(copies) != 1:
        raise BadInput("the training beside an inference job is one model x n per sweep (e.g. 'resnet50 x2')")
    n = copies.pop()
    jobs = 1 + n * len(training)  # a thread share per job, no more: 'mps(thread_percentage=100+25+25)' for three
    settings = [ModeSpec(m.name, {"thread_percentage": m.options["thread_percentage"][:jobs]})
                if "thread_percentage" in m.options else m for m in SETTINGS]
    return ExperimentSpec(jobs=[serve, *(job for job, _ in training)],
                          modes=[ModeSpec("exclusive"), *(modes or settings)], copies=[n], name=name)


def confirm_spec(spec: ExperimentSpec, advice: Advice, repeats: int) -> ExperimentSpec:
    """`spec` narrowed to the chosen setting, `repeats` times (as a new experiment: `<name>-confirm`)."""
    if advice.row is None:
        raise BadInput("nothing to confirm: no measured setting met the SLO")
    mode = next((m for m in [*spec.modes, *SETTINGS] if m.label == advice.row["mode_label"]), None)
    if mode is None:
        raise BadInput(f"the chosen setting {advice.row['mode_label']} is not one this spec can run")
    return ExperimentSpec(jobs=spec.jobs, modes=[mode], copies=spec.copies, repeats=repeats,
                          name=f"{spec.name}-confirm")


def normal_mix(text: str) -> str:
    """'resnet50 x2' or '2 x resnet50 + vit_b_16' as `mix_label` writes it."""
    models = []
    for part in text.split("+"):
        match = MIX_PART.fullmatch(part)
        if match is None or (match["before"] and match["after"]):
            raise BadInput(f"--beside takes 'model x n + ...', e.g. 'resnet50 x2'; got {text!r}")
        models += [match["model"]] * int(match["before"] or match["after"] or 1)
    return mix_label(models)


def _share(value: float) -> str:
    """A share as a whole percentage, as the kit's pages write it: '67 %'."""
    return f"{value * 100:.0f} %"
