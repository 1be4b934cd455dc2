"""The readings of what fits: notebook 05's MIG layouts (slices used and idle on the card the page plans with, the
layouts that cannot exist, how many jobs get an instance) and notebook 10's latency target (which settings kept the
served job's p99 within its SLO), each sentence made from the page's own plans and table.

    >>> from colloc_kit.gpu import mig_planner
    >>> print(slices("3g+3g", mig_planner.plan(["3g", "3g"], "H100-80GB")))
    3g+3g on H100-80GB: 6 of 7 compute slices used (1 idle), 8 of 8 memory slices used (none idle)
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from colloc_kit.analysis.latency import REQUESTS_FOR_TOP_BOUND
from colloc_kit.predict.serve_advise import launches_met
from colloc_kit.stats import plural
from colloc_kit.views.style import setting_words

__all__ = ["slices", "mig_plans", "most_instances", "setting", "slo_lines", "p99_table", "NO_BOUND"]

NO_BOUND = "—"  # a p99 bound the order statistic does not give (too few requests): a mark, never nan


def _idle(n: int) -> str:
    return "none idle" if n == 0 else f"{n} idle"


def slices(label: str, plan: Any) -> str:
    """`label on <card>: u of n compute slices used (k idle), ... memory slices ...`, from a `mig_planner.Plan`."""
    gpu = plan.gpu
    return (f"{label} on {gpu.name}: {plan.compute_slices} of {gpu.compute_slices} compute slices used "
            f"({_idle(gpu.compute_slices - plan.compute_slices)}), {plan.memory_slices} of {gpu.memory_slices} "
            f"memory slices used ({_idle(gpu.memory_slices - plan.memory_slices)})")


def most_instances(shape: Any) -> str:
    """How many jobs at most get an instance of their own on `shape` (a `mig_catalogue.GpuModel`): the most
    instances of one profile it holds."""
    plain = [p for p in shape.profiles if not p.media_extensions]
    top = max(plain, key=lambda p: (p.max_instances, -p.memory_slices))
    return (f"At most {plural(top.max_instances, 'job')} get an instance of their own on {shape.name} "
            f"({top.max_instances} x {top.name})")


def mig_plans(plans: dict[str, Any], impossible: dict[str, Any], shape: Any) -> list[str]:
    """Notebook 05: each planned layout's slices, the layouts that cannot exist and why (the planner's first reason),
    and how many jobs at most get an instance."""
    lines = [slices(label, plan) for label, plan in plans.items()]
    lines += [f"{label} cannot exist on {shape.name}: {exc.reasons[0] if exc.reasons else exc}"
              for label, exc in impossible.items()]
    return [*lines, most_instances(shape)]


def setting(mode_label: str, mix: str) -> str:
    """A setting's label with one share per job of its mix (the served job and the training copies): older runs
    listed a share for every possible job.

    >>> setting("mps(thread_percentage=100+50+50+50+50+50+50+50+50)", "resnet50 x2")
    'mps(thread_percentage=100+50+50)'
    """
    jobs = 1 + sum(int(n) for n in re.findall(r" x(\d+)", mix))
    return re.sub(r"=((?:\d+\+)+\d+)\)$", lambda m: "=" + "+".join(m[1].split("+")[:jobs]) + ")", mode_label)


def _where(value: float, target: float) -> str:
    return f"p99 {value:,.1f} ms, {'within' if value <= target else 'over'} the {target:g}-ms target"


def _launches(row: pd.Series, target: float) -> str:
    """How many of a setting's launches met the target, where it had several (its p99 is their geometric mean).

    >>> _launches(pd.Series({"launch_p99s_ms": (19.6, 36.6, 19.1)}), 25.0)
    ' (the geometric mean of 3 launches; 2 of them met it)'
    """
    met, launches = launches_met(row, target)
    return f" (the geometric mean of {launches} launches; {met} of them met it)" if launches > 1 else ""


def slo_lines(table: pd.DataFrame) -> list[str]:
    """Notebook 10: per served model and rate, the served job alone against its p99 target, how many shared settings
    met it, and the best of them (the most training) or, where none did, the lowest p99 beside training, and why
    where the job alone missed it already."""
    lines: list[str] = []
    if table.empty:
        return lines
    for (served, rate), rows in table.groupby(["served", "rate_per_s"], sort=True, dropna=False):
        target = float(rows["slo_ms"].iloc[0])
        head = f"{served} one request at a time" if pd.isna(rate) else f"{served} at {rate:g} requests/s"
        alone = rows[~rows["shared"].astype(bool)].dropna(subset=["latency_p99_ms"])
        for row in alone.itertuples():
            beside = "nothing beside it" if row.mix == "nothing" else f"the lone run before {row.mix}, {row.mode_label}"
            lines.append(f"{head}, alone ({beside}): {_where(row.latency_p99_ms, target)}")
        shared = rows[rows["shared"].astype(bool)].dropna(subset=["latency_p99_ms"])
        if shared.empty:
            continue
        within = shared[shared["latency_p99_ms"] <= target]
        said = (f"{head} beside training: {len(within)} of {plural(len(shared), 'setting')} kept the p99 within "
                "the target")
        if len(within):
            best = within.loc[within["train_images_per_s"].idxmax()]
            lines.append(f"{said}; the most training among them, {best['train_images_per_s']:,.0f} images/s "
                         f"({best['mix']}, {setting_words(setting(best['mode_label'], best['mix']))}): "
                         f"{_where(best['latency_p99_ms'], target)}{_launches(best, target)}")
            continue
        low = shared.loc[shared["latency_p99_ms"].idxmin()]
        named = setting_words(setting(low["mode_label"], low["mix"]))
        lines.append(f"{said}; the lowest p99 beside training ({low['mix']}, {named}): "
                     f"{_where(low['latency_p99_ms'], target)}, {low['latency_p99_ms'] / target:,.1f}x it"
                     f"{_launches(low, target)}")
        if len(alone) and (alone["latency_p99_ms"] > target).all():
            lines.append(f"{head}: alone at this rate it missed the target too: the rate, the SLO or the card is "
                         "what to change first, not the way of sharing")
    return lines


def _ms(value: Any, missing: str = "") -> str:
    return f"{float(value):.1f}" if pd.notna(value) else missing  # blank where missing, as every table shows it


def p99_table(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Notebook 10 and sheet 5: a frontier table (`serve_advise.frontier`) as a reader reads it, a row per setting:
    the served model and rate, the training beside it, the setting (in words, as the frontier's legend), its
    launches, the p50, the p99 with its 95 % CI (over the launches where there are several, else the one window's; a
    bound the requests do not give shown as NO_BOUND), the training images/s and whether the p99 met the SLO; and the
    footnote for the mark, from the settings that lack a bound ('' where none does).

    >>> frame = pd.DataFrame({"served": "resnet50", "rate_per_s": 38.5, "mix": "resnet50 x2", "slo_ms": 25.0,
    ...     "mode_label": ["mps", "naive"], "launches": [3, 1], "latency_p50_ms": [9.96, 14.22],
    ...     "requests_per_s": [37.0, 37.1],
    ...     "latency_p99_ms": [18.01, 30.6], "latency_p99_ms_lo": [16.75, 29.2],
    ...     "latency_p99_ms_hi": [19.35, float("nan")], "train_images_per_s": [2666.4, 1861.7],
    ...     "requests_in_window": [480, 221], "window_s": [12.0, 6.0]})
    >>> shown, note = p99_table(frame)
    >>> [str(v) for v in shown.iloc[1]]
    ['resnet50', '38.5', 'resnet50 x2', 'naive', '1', '14.2', '30.6', '29.2 – —', '37.1', '1861.7', 'no']
    >>> [str(v) for v in shown.iloc[0, 3:8]]
    ['MPS', '3', '10.0', '18.0', '16.8 – 19.4']
    >>> print(note)
    — : too few requests for the upper bound (6-s windows, 221 requests; a p99's upper bound needs about 400)
    """
    hi, lo = table["latency_p99_ms_hi"], table["latency_p99_ms_lo"]
    shown = pd.DataFrame({
        "served": table["served"], "requests/s offered": table["rate_per_s"], "training beside it": table["mix"],
        "setting": [setting_words(m) for m in table["mode_label"]], "launches": table["launches"],
        "p50 (ms)": [_ms(v) for v in table["latency_p50_ms"]], "p99 (ms)": [_ms(v) for v in table["latency_p99_ms"]],
        "p99 95 % CI (ms)": [f"{_ms(a, NO_BOUND)} – {_ms(b, NO_BOUND)}" for a, b in zip(lo, hi)],
        "requests/s answered": table["requests_per_s"], "training images/s": table["train_images_per_s"],
        "p99 within the SLO": ["yes" if v <= t else "no" for v, t in zip(table["latency_p99_ms"], table["slo_ms"])]})
    missing = table[hi.isna() & table["latency_p99_ms"].notna()]
    if missing.empty:
        return shown.reset_index(drop=True), ""
    what = []
    if "window_s" in missing and missing["window_s"].notna().any():
        seconds = sorted({round(float(s)) for s in missing["window_s"].dropna()})
        what.append("/".join(map(str, seconds)) + "-s windows")
    if "requests_in_window" in missing and missing["requests_in_window"].notna().any():
        low, high = int(missing["requests_in_window"].min()), int(missing["requests_in_window"].max())
        what.append(f"{low} requests" if low == high else f"{low}-{high} requests")
    said = f" ({', '.join(what)}; a p99's upper bound needs about {REQUESTS_FOR_TOP_BOUND})" if what else ""
    return shown.reset_index(drop=True), f"{NO_BOUND} : too few requests for the upper bound{said}"
