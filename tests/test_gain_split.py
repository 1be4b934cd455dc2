"""The split of each gain as a figure (colloc_kit.views.split, `plots.gain_split`): bars that multiply to the study's
gain on a log axis, from the shipped H100 attribution set, and a figure that says why where no cell has the split."""

import pytest

import colloc_kit
from colloc_kit import analysis, plots


@pytest.fixture(scope="module")
def summary():
    return analysis.summarize(colloc_kit.reference.load("h100-attribution"))


def test_each_cell_is_a_host_bar_from_1_then_a_gpu_bar_ending_at_the_studys_gain(summary):
    fig = plots.gain_split(summary)
    host, gpu, study, ceiling = fig.data
    assert list(host.y) == ["r26-bf16 mps x7", "r26-fp32 mps x3", "r26-fp32 naive x3", "r50-fp32 mps x3"]
    ends = [b + w for b, w in zip(gpu.base, gpu.x)]
    assert ends == pytest.approx(list(study.x), rel=1e-6) and list(host.base) == [1.0] * 4
    assert fig.layout.xaxis.type == "log"
    assert gpu.x[2] < 0  # naive x3: sharing the GPU lost (GPU's part 0.97), the bar runs back from the host's part
    assert ceiling.customdata[0] == pytest.approx(1.3756, abs=1e-3)


def test_the_reading_is_computed_from_the_numbers_and_a_run_without_the_split_says_why(summary):
    reading = plots.split_reading(summary)
    assert "r50-fp32 mps x3: study's gain 1.35 = host's part 1.12 x GPU's part 1.21" in reading
    bare = summary.drop(columns=["gpu_part_mean"])
    assert plots.gain_split(bare).layout.height == 70 and plots.split_reading(bare).startswith("no cell")


def test_a_ci_that_reaches_below_zero_ends_at_the_log_axis_and_every_point_lies_within_its_range(summary):
    """A noisy CPU gain (4.63 ± 5.2, as JupyterLab's 07 once drew it) cannot reach 0 on a log axis: its CI ends at
    the axis' lower end, inside the plot, and says so; the range holds every bar, point and CI end above 0."""
    noisy = summary.copy()
    noisy.loc[noisy["gpu_part_mean"].notna().idxmax(), "study_gain_ci"] = 5.2
    fig = plots.gain_split(noisy)
    host, gpu, study, ceiling = fig.data
    low, high = (10 ** end for end in fig.layout.xaxis.range)
    for x, plus, minus in zip(study.x, study.error_x.array, study.error_x.arrayminus):
        assert low <= x - minus and x + plus <= high and minus <= plus
    assert [cut for _, cut in study.customdata].count(" (its CI reaches below the axis: cut there)") == 1
    assert all(low <= v <= high for v in [*ceiling.x, *host.base, *(b + w for b, w in zip(gpu.base, gpu.x))])


def test_a_seed_sets_cells_are_named_by_workload_and_precision_and_only_picks_cells_in_order():
    """Before: the H200 set's cells (one experiment, three workloads in fp32 and bf16) were all 'seed-33 mps x3',
    six bars on one row of the figure. Each is named by its workload now, and `only` draws the cells named; a mix
    by its jobs, each counted (before: ResNet-26 + ResNet-50 as 1+1 and as 2+1 read the same)."""
    h200 = analysis.summarize(colloc_kit.reference.load("h200-141gb"))
    cells = plots.split_cells(h200)
    assert not cells["cell"].duplicated().any() and len(cells) == 51 + 39  # experiment 33's, then 37's mixes
    assert {"resnet26 on cifar10 + resnet50 on imagenet64 naive",
            "2 x resnet26 on cifar10 + resnet50 on imagenet64 naive"} <= set(cells["cell"])
    named = ["resnet26 bf16 on cifar10 mps x7", "resnet50 on imagenet64 naive x3"]
    fig = plots.gain_split(h200, only=named)
    assert list(fig.data[0].y) == named
    reading = plots.split_reading(h200, named)
    assert reading.startswith("resnet26 bf16 on cifar10 mps x7: study's gain 2.83 = ")
    by_cell = cells.set_index("cell")
    share = by_cell.loc["resnet26 bf16 on cifar10 mps x7", "host_share"]
    assert 0 < share < 1 and f"(the host: {100 * share:.0f} % of it, in log terms)" in reading  # both parts gain
    gpu_part = by_cell.loc["resnet50 on imagenet64 naive x3", "gpu_part_mean"]
    assert gpu_part < 1 and reading.endswith(  # the GPU's part lost: not "the host: 114 % of it"
        f"GPU's part {gpu_part:.2f} (the host: all of it and more; the GPU's part, below 1, took some back)")
    with pytest.raises(ValueError, match="no cell with the split called 'resnet26 mps x3'; the cells: resnet26 on"):
        plots.split_cells(h200, ["resnet26 mps x3"])
