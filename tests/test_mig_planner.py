"""MIG catalogue and planner: profile names, the seed's layouts, impossible layouts and their explanations."""

from collections import Counter

import pytest

from colloc_kit.errors import BadInput
from colloc_kit.gpu.mig_catalogue import GPU_MODELS, gpu_model, parse_layout, resolve
from colloc_kit.gpu.mig_planner import ImpossibleLayout, Plan, plan, propose_layouts

SEED_LAYOUTS = ["7x1g", "3x2g", "2x3g", "4g", "7g", "4g,2g,1g", "3x2g,1g"]


def assert_valid(p: Plan) -> None:
    """Independent check of NVML's rules: allowed starts, no overlap, compute and instance limits."""
    cells = Counter()
    for inst in p.instances:
        assert inst.start in inst.profile.placements
        cells.update(range(inst.start, inst.start + inst.profile.memory_slices))
    assert all(n == 1 for n in cells.values()) and max(cells) < p.gpu.memory_slices
    assert sum(i.profile.compute_slices for i in p.instances) <= p.gpu.compute_slices
    for profile, n in Counter(i.profile for i in p.instances).items():
        assert n <= profile.max_instances


@pytest.mark.parametrize("model", list(GPU_MODELS))
def test_tables_are_consistent(model):
    m = GPU_MODELS[model]
    for p in m.profiles:
        assert p.max_instances <= len(p.placements)
        assert all(0 <= s and s + p.memory_slices <= m.memory_slices for s in p.placements)
        assert p.memory_mib < m.total_memory_mib and p.sm_count <= m.sm_count
    full = max(m.profiles, key=lambda p: p.compute_slices)
    assert (full.compute_slices, full.memory_slices) == (m.compute_slices, m.memory_slices)
    assert len({p.profile_id for p in m.profiles}) == len(m.profiles)


def test_resolve_full_short_and_media_names():
    assert resolve("3g", "H100-80GB").name == "3g.40gb"
    assert resolve("1g", "H100-80GB").name == "1g.10gb"  # not 1g.20gb nor +me
    assert resolve("1G.10GB+ME", "h100").profile_id == 20
    assert resolve("MIG 2g.10gb", "A100-40GB").memory_mib == 9984
    assert resolve("4g", "A30").placements == (0,)
    with pytest.raises(BadInput, match="valid profiles: 1g.5gb, 1g.5gb\\+me"):
        resolve("3g.40gb", "A100-40GB")
    with pytest.raises(BadInput, match="built-in MIG tables"):
        gpu_model("V100")


def test_parse_layout_repeats_and_refuses_empty():
    assert [p.name for p in parse_layout("2x3g, 1g", "A100-80GB")] == ["3g.40gb", "3g.40gb", "1g.10gb"]
    assert len(parse_layout(["7x1g"], "H100-80GB")) == 7
    with pytest.raises(BadInput, match="empty"):
        parse_layout(" , ", "H100-80GB")


@pytest.mark.parametrize("model", ["A100-40GB", "H100-80GB"])
@pytest.mark.parametrize("layout", SEED_LAYOUTS)
def test_seed_layouts_plan_to_valid_placements(model, layout):
    p = plan(layout, model)
    assert_valid(p)
    assert len(p.instances) == len(parse_layout(layout, model))


def test_placements_are_the_documented_ones():
    assert [i.start for i in plan("7x1g", "A100-40GB").instances] == list(range(7))
    assert [(i.start, i.size) for i in plan("2x3g", "H100-80GB").instances] == [(0, 4), (4, 4)]
    assert [i.label() for i in plan("4g,2g,1g", "A100-40GB").instances] == ["4g.20gb@0", "2g.10gb@4", "1g.5gb@6"]
    # the 3g must move to the upper half so that two 1g instances fit below it
    assert [i.label() for i in plan("3g,2g,1g,1g", "H100-80GB").instances] == \
        ["3g.40gb@4", "2g.20gb@0", "1g.10gb@2", "1g.10gb@3"]


def test_plan_keeps_the_job_order_and_is_deterministic():
    a, b = plan("1g,3g,2g", "H100-80GB"), plan("1g,3g,2g", "H100-80GB")
    assert [i.profile.short for i in a.instances] == ["1g", "3g", "2g"] and a == b


@pytest.mark.parametrize("layout, model, expected", [
    ("4g,4g", "A100-40GB", ["needs 8 compute slices; A100-40GB has 7", "allows at most 1"]),
    ("4g,2g,1g,1g,1g", "A100-40GB", ["needs 9 compute slices; A100-40GB has 7", "needs 9 memory slices"]),
    ("8x1g", "H100-80GB", ["8 x 1g.10gb asked, H100-80GB allows at most 7", "needs 8 compute slices"]),
    ("3g,3g,1g", "A100-40GB", ["needs 9 memory slices (3g.20gb 4 + 3g.20gb 4 + 1g.5gb 1); A100-40GB has 8"]),
])
def test_impossible_layouts_are_explained_with_valid_suggestions(layout, model, expected):
    with pytest.raises(ImpossibleLayout) as caught:
        plan(layout, model)
    message = str(caught.value)
    for text in expected:
        assert text in message
    assert caught.value.suggestions
    for suggestion in caught.value.suggestions:
        assert_valid(plan(suggestion, model))
        assert suggestion in message


def test_nearest_layout_for_4g_4g_keeps_all_compute_slices():
    with pytest.raises(ImpossibleLayout) as caught:
        plan("4g,4g", "H100-80GB")
    assert caught.value.suggestions[0] == "4g.40gb,3g.40gb"


def test_placement_conflict_beside_existing_instances():
    # slices add up (5 of 7 compute, 5 of 8 memory) but a 4g can only start at 0, where a 1g already sits
    with pytest.raises(ImpossibleLayout, match="no placement fits") as caught:
        plan("4g", "H100-80GB", occupied=[(3, 1)], occupied_compute=1)
    assert "3g.40gb" in caught.value.suggestions[0]
    assert plan("3g", "H100-80GB", occupied=[(3, 1)], occupied_compute=1).instances[0].start == 4


def test_propose_layouts_gives_every_job_enough_memory():
    needs = [30000, 15000, 3000]
    proposals = propose_layouts(needs, "H100-80GB", headroom_mib=1024)
    assert proposals[0].layout() == "4g.40gb,2g.20gb,1g.10gb"
    for p in proposals:
        assert_valid(p)
        assert all(i.profile.memory_mib >= need + 1024 for i, need in zip(p.instances, needs))
    assert [p.compute_slices for p in proposals] == sorted((p.compute_slices for p in proposals), reverse=True)


def test_propose_layouts_refuses_what_cannot_fit():
    with pytest.raises(BadInput, match="largest MIG instance on A100-40GB has 40448 MiB"):
        propose_layouts([45000], "A100-40GB")
    with pytest.raises(BadInput, match="8 jobs need 8 MIG instances"):
        propose_layouts([100] * 8, "H100-80GB")
    with pytest.raises(BadInput, match="no MIG layout"):
        propose_layouts([30000, 30000, 30000], "A100-80GB")
