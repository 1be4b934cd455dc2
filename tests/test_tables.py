"""Every table a reader sees goes through one formatter: headers for readers, numbers as `number` writes them, a
mean with its CI in one cell, blanks for missing values (never "nan" or "None"), no index, within the page's width,
long tables folded."""

import math

import numpy as np
import pandas as pd

from colloc_kit.notebook import setup as notebook
from colloc_kit.views import tables


def summary_like() -> pd.DataFrame:
    """Made-up values in the shapes analysis.summarize gives (floats, NaN, None, flags), not measurements."""
    return pd.DataFrame({
        "mode_label": ["exclusive", "naive", "mps"], "copies": [1.0, 2.0, np.nan],
        "aggregate_images_per_s_mean": [4965.008249, 9820.5, np.nan], "aggregate_images_per_s_ci": [12.3, None, 1.0],
        "normalized_throughput_mean": [1.0, 1.97812, 0.0000982], "normalized_throughput_ci": [0.0412, 0.2, np.nan],
        "bound_by": ["gpu", None, np.nan], "flags": [None, "wide CI (+-3.4 %)", np.nan],
        "error": [None, "None", "nan"]})


def test_a_table_has_readers_headers_formatted_numbers_no_index_and_no_nan_or_none_text():
    shown = tables.table(summary_like())
    assert list(shown.frame.columns) == ["mode", "copies", "images/s (all jobs)", "gain (x alone)", "bound by",
                                         "flags"]  # "error", empty in every row, says nothing: left out
    assert shown.frame["copies"].tolist() == ["1", "2", ""]  # whole numbers stay whole, a missing one blank
    assert shown.frame["images/s (all jobs)"].tolist() == ["4,965 ± 12", "9,820", ""]  # 9,820.5 rounds half to even
    assert shown.frame["gain (x alone)"].tolist() == ["1.00 ± 0.04", "1.98 ± 0.20", "0.0000982"]  # never 9.82e-05
    for text in (shown.to_html(), shown.to_markdown(), shown.to_text()):
        words = text.replace("|", " ").replace("<", " ").replace(">", " ").split()
        assert "nan" not in words and "None" not in words and "NaN" not in words
    assert "<th>" not in shown.to_html().split("<tbody>")[1]  # no index column
    assert shown.frame.index.tolist() == [0, 1, 2] and "0 " not in shown.to_text().splitlines()[1][:3]


def test_numbers_are_thousands_separated_above_100_and_three_significant_digits_below():
    assert [tables.number(v) for v in (123456.7, 100.0, 99.94, 1.0, 0.5, 0.012345, 0.0, -2.5)] == \
        ["123,457", "100", "99.9", "1.00", "0.500", "0.0123", "0", "-2.50"]
    assert [tables.number(v) for v in (np.int64(12000), True, math.inf, None, float("nan"))] == \
        ["12,000", "yes", "inf", "", ""]


def test_a_long_table_is_folded_under_its_title_and_a_short_one_is_not():
    long = tables.table(pd.DataFrame({"x": range(tables.COLLAPSE_ROWS + 1)}), title="the runs")
    assert long.collapse and long.to_html().startswith("<details><summary>the runs (13 rows: click to open)")
    short = tables.table(pd.DataFrame({"x": range(3)}), title="the runs")
    assert not short.collapse and "<details>" not in short.to_html()
    assert "<details>" in tables.table(pd.DataFrame({"x": [1]}), collapse=True).to_html()


def test_the_html_stays_within_the_page_and_wraps_text_while_numbers_align_right():
    page = tables.table(pd.DataFrame({"why": ["a long reason " * 20], "copies": [7]})).to_html()
    assert 'style="max-width:100%;overflow-x:auto"' in page
    assert "text-align:left;white-space:normal;overflow-wrap:break-word" in page  # text wraps
    assert "text-align:right;white-space:nowrap" in page  # numbers stay whole


def test_markdown_escapes_pipes_and_columns_the_frame_lacks_are_skipped():
    shown = tables.table(pd.DataFrame({"layout": ["3g|3g"], "n": [2]}), ["layout", "missing", "n"])
    assert shown.to_markdown() == "| layout | n |\n|---|---|\n| 3g\\|3g | 2 |"


def test_notebooks_reach_the_same_formatter():
    assert notebook.table is tables.table and notebook.number is tables.number


def test_one_repeat_says_so_instead_of_a_zero_ci_and_shares_read_as_percentages():
    frame = pd.DataFrame({"normalized_throughput_mean": [1.84, 1.2], "normalized_throughput_ci": [0.0, 0.11],
                          "repeats": [1, 3], "input_wait_share_mean": [0.781, 0.05],
                          "input_wait_share_ci": [None, 0.02],
                          "sm_util_pct_mean": [None, None]})
    shown = tables.table(frame).frame
    assert shown["gain (x alone)"].tolist() == ["1.84 (1 repeat, no CI)", "1.20 ± 0.11"]
    assert "± 0.00" not in tables.table(frame).to_markdown()
    assert shown["waiting for data (%)"].tolist() == ["78 % (1 repeat, no CI)", "5 ± 2 %"]
    assert "SM active (%)" not in shown.columns  # empty in every row: left out


def test_one_jobs_baselines_that_differ_across_experiments_are_remarked_and_close_ones_are_not():
    summary = pd.DataFrame({"experiment": ["02", "03", "07", "07"], "mode": ["exclusive"] * 3 + ["naive"],
                            "copies": [1, 1, 1, 2], "workloads": ["smallcnn bs8"] * 4,
                            "aggregate_images_per_s_mean": [1059.0, 1989.0, 1921.0, 2500.0]})
    remark = tables.baseline_remark(summary)
    assert remark.startswith("the lone run of smallcnn bs8 measured 1,059 / 1,989 / 1,921 images/s")
    assert "(1.88x apart)" in remark
    assert tables.baseline_remark(summary.assign(aggregate_images_per_s_mean=[1000.0, 1100.0, 1050.0, 2500.0])) is None


def test_a_value_and_its_ci_share_one_cell_and_one_repeats_own_ci_is_shown_not_denied():
    frame = pd.DataFrame({"images_per_s": [5869.0, 120.0], "images_per_s_ci": [6999.0, None],
                          "normalized_throughput_mean": [1.5, 1.2], "normalized_throughput_ci": [0.186, 0.0],
                          "repeats": [1, 1], "flags": ["wide CI (± 12.4 %)", None]})
    shown = tables.table(frame).frame
    assert "images/s (95 % CI)" not in shown.columns  # never a bare half-width in a column of its own
    assert shown["images/s"].tolist() == ["5,869 ± 6,999", "120 (1 repeat, no CI)"]
    # one repeat with a CI over its own steps says it, beside the row's "wide CI" flag; a CI of 0 is none
    assert shown["gain (x alone)"].tolist() == ["1.50 ± 0.19", "1.20 (1 repeat, no CI)"]


def test_a_table_shows_its_title_folded_or_not():
    short = tables.table(pd.DataFrame({"x": [1]}), title="On this machine").to_html()
    assert short.startswith('<div class="ck-table-title"') and ">On this machine</div>" in short
    assert not tables.table(pd.DataFrame({"x": [1]})).to_html().startswith('<div class="ck-table-title"')
