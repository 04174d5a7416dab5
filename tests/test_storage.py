import json
import os

import pytest
from records import make_record

from perfsuite.compare.kinds import load_result
from perfsuite.core.errors import ConfigError, RecordError, StorageError
from perfsuite.storage import files as storage


def test_writer_saves_after_each_record_and_loads_back(tmp_path):
    path = tmp_path / "run.json"
    w = storage.ResultsWriter(path)
    a, b = make_record(seed=1), make_record(seed=2)
    w.add(a)
    assert [r.id for r in storage.load_records(path)] == [a.id]
    w.add(b)
    assert storage.load_records(path) == [a, b]


def test_writer_never_overwrites_earlier_results(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("precious")
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        storage.ResultsWriter(path)
    assert path.read_text() == "precious"


def test_atomic_write_keeps_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    w = storage.ResultsWriter(path)
    first = make_record(seed=1)
    w.add(first)
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage.os, "replace", broken_replace)
    # A perfsuite error naming the file and the reason (exit 2), not a traceback.
    with pytest.raises(StorageError, match="cannot write .*run.json: No space left on device"):
        w.add(make_record(seed=2))
    assert path.read_text() == before
    assert storage.load_records(path) == [first]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left


def test_atomic_write_cleans_up_on_interrupt(tmp_path, monkeypatch):
    path = tmp_path / "x.json"

    def interrupted_fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(storage.os, "fsync", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt):
        storage.atomic_write_text(path, "data")
    assert list(tmp_path.iterdir()) == []


def test_unwritable_directory_is_a_clear_error(tmp_path):
    if os.geteuid() == 0:
        target = tmp_path / "file-not-dir"
        target.write_text("")
        with pytest.raises(ConfigError, match="cannot create results directory"):
            storage.ResultsWriter(target / "sub" / "run.json")
    else:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        with pytest.raises(ConfigError, match="not writable"):
            storage.ResultsWriter(d / "run.json")


def test_new_results_paths_are_unique(tmp_path):
    a = storage.new_results_path(tmp_path, "matmul sweep")
    b = storage.new_results_path(tmp_path, "matmul sweep")
    assert (
        a != b and a.parent == tmp_path and "matmul_sweep" in a.name
    )  # one slug for the package (perfsuite.core.text)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON \\(line 1, column 2"),
        ('{"hello": 1}', "not a perfsuite, pytest-benchmark or asv results file"),
        ('{"format": "perfsuite.results", "schema_version": 1, "records": {}}', "'records' must be a list"),
        (
            '{"format": "perfsuite.results", "schema_version": 1, "records": [{"schema_version": 1}]}',
            "record 0: record .*missing workload",
        ),
    ],
)
def test_corrupt_or_foreign_files_name_the_file_and_fault(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(RecordError, match=message) as info:
        storage.load_records(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(RecordError, match="no such file"):
        storage.load_records(tmp_path / "nope.json")


def test_a_bare_record_loads(tmp_path):
    r = make_record()
    path = tmp_path / "one.json"
    path.write_text(json.dumps(r.to_dict()))
    assert storage.load_records(path) == [r]


@pytest.fixture
def umask():
    """Set the process umask for one test; the old one is put back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_written_files_follow_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    storage.atomic_write_text(tmp_path / "x.json", "data")
    w = storage.ResultsWriter(tmp_path / "run.json")
    assert (tmp_path / "run.json").stat().st_mode & 0o777 == mode  # as claimed, before any record
    w.add(make_record())
    assert [(tmp_path / n).stat().st_mode & 0o777 for n in ("x.json", "run.json")] == [mode, mode]


def test_two_runs_on_one_path_the_second_is_refused_at_once(tmp_path):
    path = tmp_path / "run.json"
    first = storage.ResultsWriter(path)
    assert storage.load_records(path) == []  # claimed: a valid results file with no records yet
    with pytest.raises(ConfigError, match="file exists \\(earlier results, or another run's now\\)"):
        storage.ResultsWriter(path)
    a = make_record(seed=1)
    first.add(a)
    assert storage.load_records(path) == [a]


def test_a_writer_removes_its_own_stale_temporary_files_and_no_others(tmp_path):
    path = tmp_path / "run.json"
    stale = [".run.json.abcd1234.tmp", ".run.json.x_y0z9q8.tmp"]  # mkstemp's and ours: killed writers'
    others = [
        ".run.json.x.abcd1234.tmp",
        ".other.json.abcd1234.tmp",
        "run.json.abcd1234.tmp",
        ".run.json.abcd1234.tmp.keep",
        ".run.json.abc.tmp",
        "notes.txt",
    ]
    for name in stale + others:
        (tmp_path / name).write_text("")
    w = storage.ResultsWriter(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(others + ["run.json"])
    w.add(make_record(seed=1))
    (tmp_path / stale[0]).write_text("")  # killed again, then resumed
    assert len(storage.ResultsWriter.resume(path).records) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(others + ["run.json"])


def test_one_bad_record_does_not_drop_its_files_good_ones(tmp_path):
    path = tmp_path / "run.json"
    w = storage.ResultsWriter(path)
    w.add(make_record(seed=1))
    w.add(make_record(seed=2))
    doc = json.loads(path.read_text())
    doc["records"][1]["samples_s"] = "not samples"
    path.write_text(json.dumps(doc))
    records, problems = storage.load_many([tmp_path])
    assert len(records) == 1 and len(problems) == 1 and "record 1" in problems[0]
    with pytest.raises(RecordError, match="record 1"):  # read alone, the file is still refused
        storage.load_records(path)


def test_a_results_file_from_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "run.json"
    storage.ResultsWriter(path).add(make_record(seed=1))
    doc = json.loads(path.read_text())
    doc["schema_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match="schema_version 99"):
        storage.load_records(path)


PAIR = {
    "workload": "w",
    "params": {},
    "vary": "x",
    "a": 1,
    "b": 2,
    "ratios": [1.5],
    "saved_bytes_a": 0,
    "saved_bytes_b": 0,
}


@pytest.mark.parametrize("kind, results", [("pair", [PAIR]), ("peaks", {"cpu|x": {"flops_per_s": {}}})])
def test_documents_are_versioned_and_validated(tmp_path, kind, results):
    from perfsuite.compare.pair import PairResult  # pair documents are read into it

    path = tmp_path / f"d.{kind}.json"
    path.write_text(storage.document(kind, results))
    doc = json.loads(path.read_text())
    assert doc["format"] == f"perfsuite.{kind}" and doc["schema_version"] == storage.DOCUMENT_VERSION
    # A kind with a result class is read into it (its derived figures computed); the others as data.
    assert load_result(path, kind) == ([PairResult(**PAIR)] if kind == "pair" else results)
    doc["schema_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match="schema_version 99"):
        load_result(path, kind)
    path.write_text(storage.document("gate", []))
    with pytest.raises(RecordError, match="expected 'perfsuite"):
        load_result(path, kind)


def test_a_pair_result_missing_its_ratios_is_named(tmp_path):
    path = tmp_path / "x.pair.json"
    path.write_text(json.dumps([{k: v for k, v in PAIR.items() if k != "ratios"}]))  # version 0: a bare list
    with pytest.raises(RecordError, match="pair result 0: missing ratios"):
        load_result(path, "pair")


def test_strict_json_has_no_nan_or_infinity():
    text = storage.dumps({"a": float("nan"), "b": [float("inf"), 1.5]})
    assert json.loads(text) == {"a": None, "b": [None, 1.5]} and "NaN" not in text
