"""Every road's outputs are checked before it measures (storage.write.check_output/_dir), and a
write that still fails afterwards keeps what was measured (write_or_rescue)."""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

import pytest

from perfsuite.cli import app as cli
from perfsuite.core.errors import StorageError
from perfsuite.storage import write


def _dangling(tmp_path: Path) -> Path:
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "nowhere" / "target.json")
    return link


@pytest.mark.parametrize(
    "argv",
    [
        ["gate", "matmul", "-p", "n=32", "--slowdown", "0.1", "--json", "{link}"],
        ["why", "matmul", "-p", "n=32", "--vary", "dtype=fp32,bf16", "--json", "{link}"],
        ["--peak-file", "{link}", "peak", "--device", "cpu"],
    ],
)
def test_a_dangling_symlink_as_an_output_is_refused_before_anything_is_measured(tmp_path, capsys, argv):
    link = _dangling(tmp_path)
    code = cli.main([a.replace("{link}", str(link)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "symbolic link" in err and not (tmp_path / "nowhere").exists()


def test_a_peak_file_that_is_a_folder_and_a_trace_folder_that_is_a_file_are_refused(tmp_path, capsys):
    assert cli.main(["--peak-file", str(tmp_path), "peak", "--device", "cpu"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    afile = tmp_path / "trace"
    afile.write_text("")
    out = tmp_path / "r.json"
    assert (
        cli.main(["run", "noop", "--device", "cpu", "--max-time", "0.1", "--trace", str(afile), "--out", str(out)]) == 2
    )
    assert "--trace folder" in capsys.readouterr().err and not out.exists()


def test_a_disk_without_room_is_refused_before_measuring(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(write.shutil, "disk_usage", lambda p: usage(1 << 30, (1 << 30) - 4096, 4096))
    with pytest.raises(StorageError, match="MiB free"):
        write.check_output(tmp_path / "verdicts.json", "--json")
    with pytest.raises(StorageError, match="MiB free"):
        write.check_output_dir(tmp_path / "trace", "--trace")


def test_an_existing_output_is_refused_unless_it_is_a_file_perfsuite_updates(tmp_path):
    f = tmp_path / "peak.json"
    f.write_text("{}")
    with pytest.raises(StorageError, match="refusing to overwrite"):
        write.check_output(f, "--json")
    assert write.check_output(f, "--peak-file", replace=True) == f


def test_a_write_that_fails_after_measuring_keeps_the_text_and_names_where(tmp_path, monkeypatch):
    def full(path, text):
        raise StorageError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(write, "write_text", full)
    with pytest.raises(StorageError, match="kept in") as caught:
        write.write_or_rescue(tmp_path / "gate.json", '{"verdicts": 1}', "--json")
    rescued = Path(str(caught.value).rsplit("kept in ", 1)[1])
    try:
        assert rescued.read_text() == '{"verdicts": 1}'
    finally:
        os.unlink(rescued)


def test_tensorboard_export_does_not_follow_a_planted_run_folder_out_of_the_log_directory(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from records import make_record

    from perfsuite.storage.files import results_document
    from perfsuite.storage.tensorboard import case_run

    rec = make_record()
    src = tmp_path / "r.json"
    src.write_text(results_document([rec]))
    logdir, outside = tmp_path / "tb", tmp_path / "outside"
    logdir.mkdir()
    outside.mkdir()
    run = logdir / case_run(rec.workload, rec.params, rec.device)
    run.parent.mkdir(parents=True)
    run.symlink_to(outside, target_is_directory=True)
    assert cli.main(["export", "tensorboard", str(src), "--logdir", str(logdir)]) == 2
    assert "outside" in capsys.readouterr().err and list(outside.iterdir()) == []
