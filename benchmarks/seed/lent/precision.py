"""Which of an experiment folder's collocated cells meet issue 50's precision targets (95 % CI half-width over the
mean: the study's gain and the host's part within 10 %, the GPU's part within 5 %), each as `colloc-kit show` says it
(`analysis.summaries.summarize`): a markdown table and a count.

    python benchmarks/seed/lent/precision.py RUNS/seed-33
"""

from __future__ import annotations

import argparse

import colloc_kit
from colloc_kit.analysis.summaries import summarize

TARGETS = {"study_gain": 0.10, "host_part": 0.10, "gpu_part": 0.05}


def precision_table(folder: str) -> str:
    """The table: per collocated cell (mode, copies, workload), each figure's relative CI and whether it meets its
    target; a last line counts the cells that meet all three."""
    summary = summarize(colloc_kit.load(folder))
    shared = (summary["n_jobs"] > 1) & (summary["mode"] != "exclusive")  # copies of a job, or a mix (copies 1)
    rows = summary[shared & summary["baseline"].isna()]  # not a baseline's own (gpu-only) cells
    lines = ["| mode | copies | jobs | " + " | ".join(f"{f} (±, target {t:.0%})" for f, t in TARGETS.items()) + " |",
             "|---|---|---|" + "---|" * len(TARGETS)]
    meets = 0
    for _, row in rows.iterrows():
        cells, ok = [], True
        for figure, target in TARGETS.items():
            mean, ci = row.get(f"{figure}_mean"), row.get(f"{figure}_ci")
            if mean is None or ci is None or mean != mean or ci != ci:
                cells.append("no baseline")
                ok = False
                continue
            width = ci / mean
            ok &= width <= target
            cells.append(f"{mean:.2f} ± {width:.1%}" + ("" if width <= target else " (over)"))
        meets += ok
        lines.append(f"| {row['mode_label']} | {row['copies']} | {row['jobs_label']} | " + " | ".join(cells) + " |")
    lines.append(f"\n{meets} of {len(rows)} collocated cells meet all three targets.")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    print(precision_table(parser.parse_args().folder))
