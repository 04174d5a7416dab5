import json
import os

import pytest
from records import make_record

from perfsuite import storage
from perfsuite.errors import ConfigError, RecordError


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
    with pytest.raises(OSError):
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
    assert a != b and a.parent == tmp_path and "matmul-sweep" in a.name


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON \\(line 1, column 2"),
        ('{"hello": 1}', "not a perfsuite, pytest-benchmark or asv results file"),
        ('{"format": "perfsuite.results", "schema_version": 1, "records": {}}', "'records' must be a list"),
        ('{"format": "perfsuite.results", "schema_version": 1, "records": [{"schema_version": 1}]}',
         "record 0: record is missing field"),
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
