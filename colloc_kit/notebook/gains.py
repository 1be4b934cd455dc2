"""The readings of gains: notebooks 03 (naive copies), 04 (free MPS against MIG-shaped partitions), 07 (every mode
of a results folder) and 08 (the seed study's cells), each sentence made from the summary the page shows and
carrying the relations it states (`readings.Said`), so that a test can check them against the numbers in the text.

    >>> import pandas as pd
    >>> summary = pd.DataFrame({"experiment": "e", "mode": "naive", "mode_label": "naive", "copies": [2, 4],
    ...                         "workloads": "resnet18 bs64", "normalized_throughput_mean": [1.52, 1.31],
    ...                         "normalized_throughput_ci": [0.10, 0.05], "epoch_time_growth_mean": [1.31, 3.05],
    ...                         "bound_by": "gpu"})
    >>> for line in by_copies(summary, "naive"):  # each line here cut after its semicolons and its last colon
    ...     print(line.replace("; ", ";\\n    ").replace(": past", ":\\n    past"))
    resnet18 bs64, naive x2: 1.52x ± 0.10 in total, more work than one job alone (1);
        each job's epoch 1.31x as long: above the diagonal (more gained than each job lost);
        bound by gpu
    resnet18 bs64, naive x4: 1.31x ± 0.05 in total, more work than one job alone (1);
        each job's epoch 3.05x as long: below the diagonal (each job lost more than the total gained);
        bound by gpu
    resnet18 bs64: the gain at x4 (1.31x ± 0.05) is smaller than that at x2 (1.52x ± 0.10):
        past 2 copies the gain falls
"""

from __future__ import annotations

import math

import pandas as pd

from colloc_kit.notebook.readings import Said, compare, relation_of
from colloc_kit.stats import plural

__all__ = ["shown", "total", "between", "diagonal", "by_copies", "partitions_against_free", "by_mode", "nearer",
           "seed_cells"]

GAIN = "normalized_throughput_mean"
TOTAL_WORDS = {"larger": "more work than", "smaller": "less work than"}
DIAGONAL_WORDS = {"larger": "above the diagonal (more gained than each job lost)",
                  "smaller": "below the diagonal (each job lost more than the total gained)",
                  "within": "on the diagonal, within the gain's CI"}


def _ci(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def shown(value: float, ci: float | None) -> str:
    """A gain as a page shows it: '1.84x ± 0.12', or '1.84x' without a CI (one repeat)."""
    return f"{value:.2f}x" + (f" ± {ci:.2f}" if ci is not None else "")


def total(label: str, value: float, ci: float | None, against: str = "one job alone") -> Said:
    """`label: 1.52x ± 0.10 in total, more work than one job alone (1)`: the relation to 1 read with the CI (a CI
    that holds 1 says "the same work, within its CI"), or within 5 % where there is no CI."""
    margin = ci if ci is not None else 0.05
    relation = relation_of(value, 1.0, half_width=margin)
    words = TOTAL_WORDS.get(relation) or ("the same work, within its CI, as" if ci is not None else "within 5 % of")
    return Said(f"{label}: {shown(value, ci)} in total, {words} {against} (1)", relation, value, 1.0,
                half_width=margin)


def between(left_label: str, left: float, left_ci: float | None, right_label: str, right: float,
            right_ci: float | None) -> Said:
    """`left (1.31x ± 0.05) is smaller than right (1.52x ± 0.10)`: a difference counts only past both CIs together
    (intervals that overlap are "within the CIs"), or past 5 % of the right where neither has a CI."""
    cis = [c for c in (left_ci, right_ci) if c is not None]
    margin = sum(cis) if cis else None
    relation = relation_of(left, right, half_width=margin)
    verb = {"larger": "is larger than", "smaller": "is smaller than"}.get(relation) or (
        "is within the CIs of" if margin is not None else "is within 5 % of")
    return Said(f"{left_label} ({shown(left, left_ci)}) {verb} {right_label} ({shown(right, right_ci)})", relation,
                left, right, half_width=margin)


def diagonal(gain: float, ci: float | None, growth: float) -> Said:
    """`each job's epoch 1.31x as long: above the diagonal`: the gain against each job's slowdown (the dotted
    diagonal of the gain-against-slowdown figure), within the gain's CI where it has one."""
    relation = relation_of(gain, growth, half_width=ci if ci is not None else 0.05 * growth)
    words = DIAGONAL_WORDS[relation] if ci is not None or relation != "within" else "within 5 % of the diagonal"
    return Said(f"each job's epoch {growth:.2f}x as long: {words}", relation, gain, growth,
                half_width=ci if ci is not None else 0.05 * growth)


def _bound(value: object) -> str:
    return value if isinstance(value, str) and value else "unknown"


def _line(label: str, row: pd.Series) -> str:
    """One configuration: its total against one job alone, each job's epoch against the diagonal, what bound it."""
    gain, ci, growth = float(row[GAIN]), _ci(row.get("normalized_throughput_ci")), row.get("epoch_time_growth_mean")
    parts = [str(total(label, gain, ci))]
    if growth is not None and not pd.isna(growth):
        parts.append(str(diagonal(gain, ci, float(growth))))
    flags = row.get("flags")
    return "; ".join([*parts, f"bound by {_bound(row.get('bound_by'))}"]
                     + ([str(flags)] if isinstance(flags, str) and flags else []))


def _measured(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows that shared the GPU and have a gain (a baseline to divide by)."""
    if summary.empty or not {GAIN, "mode"} <= set(summary):
        return pd.DataFrame(columns=["experiment", "mode", "mode_label", "copies", "workloads", "jobs_label", GAIN])
    return summary[summary["mode"].ne("exclusive") & summary[GAIN].notna()]


def _workloads(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    keys = [k for k in ("experiment", "workloads") if k in rows]
    many = "experiment" in rows and rows["experiment"].nunique() > 1
    return [(f"{key[1]} ({key[0]})" if many else str(key[-1]), group.sort_values("copies"))
            for key, group in rows.groupby(keys, sort=True)]


def by_copies(summary: pd.DataFrame, mode: str) -> list[str]:
    """Notebook 03: per workload under `mode`, each copy count's line, then how the gain went at the most copies:
    against the highest gain where that came earlier ("falls" only if below both CIs), or against the copy count
    before it ("still grows" only if above both CIs)."""
    lines: list[str] = []
    rows = _measured(summary)
    alone_workloads = rows[rows["mode"].eq(mode) & ~rows["workloads"].astype(str).str.contains(" + ", regex=False)]
    for label, group in _workloads(alone_workloads):  # copies of one workload (mixes are 06's)
        lines += [_line(f"{label}, {row['mode_label']} x{row['copies']}", row) for _, row in group.iterrows()]
        if len(group) < 2:
            continue
        best, last = group.loc[group[GAIN].idxmax()], group.iloc[-1]
        other = best if best["copies"] != last["copies"] else group.iloc[-2]
        said = between(f"the gain at x{last['copies']}", last[GAIN], _ci(last.get("normalized_throughput_ci")),
                       f"that at x{other['copies']}", other[GAIN], _ci(other.get("normalized_throughput_ci")))
        words = {"larger": "the gain still grows at the most copies measured",
                 "smaller": f"past {other['copies']} copies the gain falls"}.get(
            said.relation, f"from {other['copies']} to {last['copies']} copies no change beyond the noise")
        lines.append(f"{label}: {said}: {words}")
    return lines


def partitions_against_free(summary: pd.DataFrame) -> list[str]:
    """Notebook 04: each configuration's line, then each MIG-shaped partition layout against free MPS with as many
    jobs of the same workload, with their CIs."""
    rows = _measured(summary)
    rows = rows[rows["mode"].eq("mps")]
    lines = [_line(f"{label}, {row['mode_label']} x{row['copies']}", row)
             for label, group in _workloads(rows) for _, row in group.iterrows()]
    for label, group in _workloads(rows):
        free = group[group["mode_label"].eq("mps")].drop_duplicates("jobs_label").set_index("jobs_label")
        for _, row in group[group["mode_label"].str.startswith("mps(partitions=")].iterrows():
            if row["jobs_label"] in free.index:  # as many jobs of the same workloads, free
                other = free.loc[row["jobs_label"]]
                layout = row["mode_label"].removeprefix("mps(partitions=").removesuffix(")")
                lines.append(f"{label}: " + str(between(
                    f"MPS partitions {layout}", row[GAIN], _ci(row.get("normalized_throughput_ci")),
                    f"free MPS x{row['copies']}", other[GAIN], _ci(other.get("normalized_throughput_ci")))))
    return lines


def by_mode(together: pd.DataFrame) -> list[str]:
    """Notebook 07: per mode the median gain and the highest (with its CI, the configuration, each job's epoch),
    the modes' medians against each other from the most to the least, and how gain and SM activity go together."""
    rows, lines = _measured(together), []
    for mode, group in rows.groupby("mode", sort=True):
        best = group.loc[group[GAIN].idxmax()]
        growth = best.get("epoch_time_growth_mean")
        highest = shown(best[GAIN], _ci(best.get("normalized_throughput_ci")))
        lines.append(f"{mode}: over {plural(len(group), 'configuration')} the median gain was "
                     f"{group[GAIN].median():.2f}x, the highest {highest}"
                     f" ({best['jobs_label']}, {best['mode_label']})"
                     + (f", each job's epoch {growth:.2f}x as long there" if growth == growth and growth is not None
                        else "") + f", bound by {_bound(best.get('bound_by'))}")
    medians = rows.groupby("mode")[GAIN].median().sort_values(ascending=False) if len(rows) else pd.Series()
    for (high, a), (low, b) in zip(list(medians.items()), list(medians.items())[1:]):
        lines.append(str(compare(f"{high}'s median gain", a, f"{low}'s", b, "x", digits=2)))
    busy = rows.dropna(subset=["sm_util_pct_mean"]) if "sm_util_pct_mean" in rows else rows.iloc[0:0]
    if len(busy) > 2:
        corr = busy["sm_util_pct_mean"].corr(busy[GAIN], method="spearman")
        if not math.isnan(corr):
            lines.append(f"Across {plural(len(busy), 'configuration')} with SM activity measured, gain and SM "
                         f"activity correlate {corr:+.2f} (Spearman).")
    return lines


def nearer(gain: float, ci: float | None, copies: int) -> str:
    """Where a gain of `copies` copies lies between 1 (the copies filled the card) and `copies` (one job left it
    mostly idle): `3.01x ± 0.56 of 7 copies: nearer 1 than 7`, midway where its CI holds the midpoint."""
    middle = (1 + copies) / 2
    relation = relation_of(gain, middle, half_width=ci if ci is not None else 0.0)
    words = {"larger": f"nearer {copies} than 1 (one job alone left the card mostly idle)",
             "smaller": f"nearer 1 than {copies} (the copies filled what one job left)"}.get(
        relation, f"midway between 1 and {copies}, within its CI")
    return f"{shown(gain, ci)} of {plural(copies, 'copy', 'copies')}: {words}"


def seed_cells(cells: pd.DataFrame, missing: pd.DataFrame) -> list[str]:
    """Notebook 08: per way of sharing, its highest gain of experiment 33 and where it lies between 1 and the
    copies; what bound the cells; how busy the host got; the cells not run and why."""
    if cells.empty or not {"kind", GAIN, "copies"} <= set(cells):
        shared = pd.DataFrame(columns=["kind", GAIN, "copies", "bound_by"])
    else:
        shared = cells[cells["kind"].ne("alone") & cells[GAIN].notna() & cells["copies"].gt(1)]
    lines = []
    for kind, group in shared.groupby("kind", sort=False):
        best = group.loc[group[GAIN].idxmax()]
        lines.append(f"{kind}: the highest gain, {best['jobs_label']} ({best['mode_label']}), "
                     + nearer(best[GAIN], _ci(best.get("normalized_throughput_ci")), int(best["copies"])))
    if len(shared):
        counts = shared["bound_by"].fillna("unknown").value_counts()
        lines.append(f"Of {plural(len(shared), 'cell')} that shared the card, bound by "
                     + ", ".join(f"{bound}: {n}" for bound, n in counts.items()))
        host = shared.dropna(subset=["host_cpu_util_pct_mean"]) if "host_cpu_util_pct_mean" in shared else shared[:0]
        if len(host):
            top = host.loc[host["host_cpu_util_pct_mean"].idxmax()]
            lines.append(f"The host CPU was busiest at {top['host_cpu_util_pct_mean']:.0f} % ({top['jobs_label']}, "
                         f"{top['mode_label']})")
    if len(missing):
        states = missing["state"].astype(str)
        predicted, oom = int(states.str.startswith("not run").sum()), int(states.str.contains("out of memory").sum())
        lines.append(f"Cells not run: {plural(predicted, 'cell')} predicted not to fit (not evidence for claim 2); "
                     f"{plural(oom, 'cell')} whose jobs ran out of memory")
    return lines
