"""The seed study's claims held against measured runs (notebook 08 and `docs/findings.md`).

Experiment 33 trains copies of one model under naive time-slicing, MPS and MIG-shaped shares (MPS partitions where
MIG is off: "MPS partition (not MIG)"); experiment 37 trains mixes of the three models. `configurations` summarises an
experiment per cell with the evidence beside each gain; `claims` puts each claim of the paper beside what the data
shows; `markdown` writes it all as findings. Every number is computed from the frames given, none is pasted; cells the
data lacks are listed, never fatal.

Eleven layers, each importing only the ones before it: `read.py` (the data: runs, cells), `missing.py` (the cells it
lacks: predicted not to fit, or seen out of memory), `verdict.py` (what a verdict holds: the cells that decided it
and those set aside; comparing by CIs; settling where a cell cannot decide), `gain.py` (claim 1: every shared cell's
gain against 3x, and whose part it was), `sharing.py` (claims 3 and 4: ways of sharing against each other),
`judge.py` (the claims, claim 2's rule, the yardsticks), `fairness.py` (who lost when jobs shared, shares asked and
had), `charts.py` (one figure per claim, and their images), `appendix.py` (the detail tables, repeated lines grouped),
`render.py` (the report: verdicts, figures, fairness, appendix; as Markdown for docs/findings.md), `kept.py` (a
set's report kept on disk between processes: `report_of`).
Their public names are all here; `findings.read` is the function `read.read` (the layers import the module by its
path, `from .read import ...`).

    >>> kind_of("mig", "mig(layout=4g.40gb+2g.20gb+1g.10gb)")
    ('MIG', '4g+2g+1g')
    >>> results, not_run, source = read("h100-80gb")                       # doctest: +SKIP
    >>> cells, note = configurations(results, "seed-33")                   # doctest: +SKIP
    >>> missing_cells(cells, not_run)                                      # doctest: +SKIP
    >>> print(markdown(results, gpu_of(results), source=source, not_run=not_run))  # doctest: +SKIP
    >>> found = report_of("h100-80gb")            # read, reported, kept on disk for the next process  # doctest: +SKIP
"""

from colloc_kit.findings.appendix import (
    fit_table, gain_table, grouped_evidence, grouped_fairness, mix_shares, mix_table, not_run_table, pretty,
    shares_by_layout, unplaceable,
)
from colloc_kit.findings.charts import TITLES, claim_figures, for_plots, save_png, versus_figure
from colloc_kit.findings.fairness import (
    FAIRNESS_TEXT,
    SHARES_TEXT,
    fairness_findings,
    least_fair,
    naive_vs_mps,
    shared_jobs,
    shares_table,
)
from colloc_kit.findings.gain import (
    CLAIMED_GAIN, GAIN_RULE, attribution, gain_outcome, judge_cells, judge_gain, short_name,
)
from colloc_kit.findings.judge import (
    BUSIEST_LEAST,
    GAIN_CLAIM,
    STUDY_GPU,
    capacities,
    claims,
    gain_text,
    mig_placements,
    prediction_errors,
)
from colloc_kit.findings.read import (
    ALONE,
    EVIDENCE,
    KINDS,
    MIG,
    MIX_MODELS,
    MPS,
    NAIVE,
    PARTITION,
    STUDY_33,
    as_run,
    configurations,
    gpu_of,
    kind_of,
    layout_key,
    mix_label,
    name_of,
    Part,
    part_of,
    read,
    summarized,
)
from colloc_kit.findings.missing import OUT_OF_MEMORY, PREDICTED, missing_cells, with_margin
from colloc_kit.findings.sharing import MIG_CLAIM, MPS_CLAIM, NOT_MIG, comparable, judge_mig, judge_mps
from colloc_kit.findings.verdict import (
    AGREES, CANNOT_TELL, DISAGREES, NOT_MEASURED, PARTLY, VERDICTS, Cell, Decision, ahead, grouped, listed,
    noise_by_claim, settle, verdict,
)
from colloc_kit.findings.render import (
    LIKE_33,
    Report,
    a100_note,
    all_gains,
    all_missing,
    as_markdown,
    markdown,
    because,
    report,
    verdicts,
)
from colloc_kit.findings.kept import report_of

__all__ = ["ALONE", "NAIVE", "MPS", "PARTITION", "MIG", "KINDS", "MIX_MODELS", "STUDY_33", "EVIDENCE", "PREDICTED",
           "OUT_OF_MEMORY", "with_margin", "read", "gpu_of",
           "kind_of", "layout_key", "name_of", "configurations", "Part", "part_of", "summarized", "mix_label",
           "missing_cells", "as_run",
           "AGREES", "PARTLY", "DISAGREES", "CANNOT_TELL", "NOT_MEASURED", "VERDICTS", "Cell", "Decision", "ahead",
           "settle", "verdict", "listed", "grouped",
           "CLAIMED_GAIN", "GAIN_RULE", "short_name", "gain_outcome", "judge_cells", "judge_gain", "attribution",
           "MIG_CLAIM", "MPS_CLAIM", "NOT_MIG", "comparable", "judge_mig", "judge_mps",
           "STUDY_GPU", "GAIN_CLAIM", "BUSIEST_LEAST", "capacities", "mig_placements", "claims", "gain_text",
           "prediction_errors",
           "FAIRNESS_TEXT", "SHARES_TEXT", "shared_jobs", "least_fair", "naive_vs_mps", "shares_table",
           "fairness_findings", "TITLES", "for_plots", "claim_figures", "versus_figure", "save_png", "pretty",
           "gain_table", "mix_table", "not_run_table", "fit_table", "unplaceable", "grouped_evidence",
           "shares_by_layout", "mix_shares", "grouped_fairness",
           "LIKE_33", "Report", "report", "report_of", "verdicts", "because", "noise_by_claim", "all_gains",
           "all_missing", "markdown",
           "as_markdown",
           "a100_note"]
