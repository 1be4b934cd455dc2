"""The reference cells, a set's summary and its findings kept on disk between processes
(`colloc_kit.predict.kept`): read back as computed, never stale (a changed input or line of the kit is a new key),
computed where nothing can be kept."""

import shutil

import pandas as pd
import pytest

from colloc_kit import findings, reference
from colloc_kit.analysis import summaries
from colloc_kit.findings import kept as kept_findings
from colloc_kit.predict import check, kept


@pytest.mark.slow
def test_the_reference_cells_read_back_are_the_ones_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLOC_KIT_CACHE", str(tmp_path))
    computed = check.reference_cells.__wrapped__()  # past this process's lru_cache: computed, then kept
    (path,) = tmp_path.glob("reference-cells-*.pickle")
    monkeypatch.setattr(check, "_reference_cells", lambda: pytest.fail("computed again instead of read back"))
    read = check.reference_cells.__wrapped__()
    assert repr(read) == repr(computed)  # every field of every cell (a NaN CI compares unequal to itself)
    pd.testing.assert_frame_equal(check.validate(read), check.validate(computed))
    assert sorted(tmp_path.iterdir()) == [path]


def test_a_changed_line_of_the_kit_or_a_changed_input_is_a_new_key(tmp_path, monkeypatch):
    code, data = tmp_path / "code", tmp_path / "data"
    for folder, name in ((code, "module.py"), (data, "runs.parquet")):
        folder.mkdir()
        (folder / name).write_text("one")
    monkeypatch.setattr(kept, "KIT", code)
    before = kept.key([data])
    (code / "module.py").write_text("two")
    after_code = kept.key([data])
    (data / "runs.parquet").write_text("two")
    assert len({before, after_code, kept.key([data])}) == 3


def test_an_unreadable_kept_file_is_computed_again_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLOC_KIT_CACHE", str(tmp_path))
    kept.kept("x", [], lambda: 1)
    (path,) = tmp_path.glob("x-*.pickle")
    path.write_bytes(b"half a file")
    assert kept.kept("x", [], lambda: 2) == 2 and kept.kept("x", [], lambda: 3) == 2


def test_where_nothing_can_be_kept_the_result_is_computed_each_time(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("COLLOC_KIT_CACHE", str(tmp_path / "a-file" / "cache"))  # under a file: no folder there
    assert kept.kept("x", [], lambda: 1) == 1 and kept.kept("x", [], lambda: 2) == 2


def test_a_sets_findings_are_kept_per_set_and_gpu_and_made_anew_when_its_bytes_change(tmp_path, monkeypatch):
    """`findings.report_of`, as notebook 08 calls it: the report (here a stand-in for `report`'s figures) is kept under
    the folder's bytes, the GPU and the models; another GPU is another report, a changed file of the set a new key."""
    monkeypatch.setenv("COLLOC_KIT_CACHE", str(tmp_path / "cache"))
    data = str(shutil.copytree(reference.folder("h100-attribution"), tmp_path / "set"))
    made = []

    def report(results, gpu, models=None, source="", not_run=None):
        made.append(gpu)
        return len(results.runs), gpu, source, len(not_run)

    monkeypatch.setattr(kept_findings, "report", report)
    first = findings.report_of(data)
    assert first[0] == len(reference.load(data).runs) and data in first[2]
    assert findings.report_of(data) == first and len(made) == 1  # read back
    assert findings.report_of(data, "A100-40GB")[1] == "A100-40GB" and len(made) == 2  # its own report
    assert findings.report_of(data, models={"R26": "resnet18"}) == first and len(made) == 3
    assert len(list((tmp_path / "cache").glob("findings-*.pickle"))) == 3
    (tmp_path / "set" / "README.md").write_text("another note")
    assert findings.report_of(data) == first and len(made) == 4  # the same figures, computed again
    assert findings.report_of(str(tmp_path / "nothing-here"))[0] == 0 and len(made) == 5  # nothing to keep: read says


def test_a_sets_summary_is_kept_per_set_and_made_anew_when_its_bytes_change(tmp_path, monkeypatch):
    """`reference.summary`, as notebooks 07, 08 and course sheet 4 call it: a set's cells summarized once and read
    back by the next process; another set keeps a file of its own, a changed file of the set is a new key."""
    monkeypatch.setenv("COLLOC_KIT_CACHE", str(tmp_path / "cache"))
    data = shutil.copytree(reference.folder("h100-attribution"), tmp_path / "set")
    (data / "README.md").write_text("a copy")  # its bytes differ from the shipped folder's
    made, summarize = [], summaries.summarize
    monkeypatch.setattr(summaries, "summarize", lambda results: made.append(len(results.runs)) or summarize(results))
    first = reference.summary(data)
    pd.testing.assert_frame_equal(first, summarize(reference.load(data)))
    assert reference.summary(data).equals(first) and len(made) == 1  # read back
    assert reference.summary("h100-attribution").equals(first) and len(made) == 2  # another set: its own file
    assert reference.summary(data).equals(first) and len(made) == 2  # neither replaced the other's file
    (data / "README.md").write_text("another note")
    assert reference.summary(data).equals(first) and len(made) == 3  # the same cells, summarized again
    assert len(list((tmp_path / "cache").glob("summary-*.pickle"))) == 2  # the set's earlier key's file replaced
