"""`perfsuite history --asv` on a hostile asv results folder: links, FIFOs, a machine.json naming
another folder, a parameter of 900 characters. The export is called on a small history walked with
fake pairs (tests/test_history.py), never a measured one: each case takes a second or less."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
from test_history import _pairer, _state

from perfsuite.compare.bisection import Commit
from perfsuite.compare.history_walk import walk
from perfsuite.compare.paired_history import History
from perfsuite.core.errors import PerfsuiteError, StorageError

pytest.importorskip("asv")
from perfsuite.frontends import asv_history  # noqa: E402 - after the skip: it imports asv when used

CONF = {
    "version": 1,
    "project": "p",
    "repo": ".",
    "branches": ["main"],
    "dvcs": "git",
    "environment_type": "existing",
    "results_dir": ".asv/results",
    "html_dir": ".asv/html",
}
MACHINE = "m1"


@contextlib.contextmanager
def _no_hang(seconds: int = 20):
    """A FIFO read would block forever: fail the test instead of hanging the suite."""

    def stop(signum, frame):
        raise AssertionError(f"still blocked after {seconds} s (a FIFO opened for reading?)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _history(params: dict | None = None) -> History:
    """A base and two commits walked with fake pairs; shas that differ in their first 8 characters
    (asv names a result file by them)."""
    commits = [Commit(c * 40, f"commit {c}") for c in "12"]
    state = History("w", params or {"n": 1}, "cpu", Commit("b" * 40, "base"), commits, _state(0).settings)
    walk(state, _pairer(state, {1: 1.3})[0], {})
    return state


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(asv.conf.json, its results folder with machine MACHINE known, a folder outside it)."""
    root = tmp_path / "p"
    results = root / ".asv" / "results"
    (results / MACHINE).mkdir(parents=True)
    (results / MACHINE / "machine.json").write_text(json.dumps({"machine": MACHINE, "version": 1}))
    (root / "asv.conf.json").write_text(json.dumps(CONF))
    outside = tmp_path / "outside"
    outside.mkdir()
    return root / "asv.conf.json", results, outside


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_clean_export_still_writes_one_result_file_per_commit(tmp_path):
    conf, results, _ = _project(tmp_path)
    written = asv_history.export(_history(), conf, tmp_path)
    assert [p.parent for p in written] == [results / MACHINE] * 3 and all(p.is_file() for p in written)
    assert asv_history.benchmark_name(_history()) in json.loads((results / "benchmarks.json").read_text())


def test_a_machine_folder_linked_outside_is_refused_and_nothing_is_written(tmp_path):
    conf, results, outside = _project(tmp_path)
    (outside / "machine.json").write_text(json.dumps({"machine": MACHINE, "version": 1}))
    (results / MACHINE / "machine.json").unlink()
    (results / MACHINE).rmdir()
    (results / MACHINE).symlink_to(outside)
    before = _files(outside)
    with pytest.raises(StorageError, match=f"{MACHINE}.*outside"):
        asv_history.export(_history(), conf, tmp_path)
    assert _files(outside) == before
    assert not (results / "benchmarks.json").exists()
    with pytest.raises(StorageError):  # and before a history measures anything
        asv_history.preflight(conf)


def test_a_link_in_place_of_a_result_file_is_refused_before_any_file_is_written(tmp_path):
    conf, results, outside = _project(tmp_path)
    state = _history()
    victim = outside / "victim.json"
    victim.write_text("keep me\n")
    planted = results / MACHINE / f"{state.commits[1].sha[:8]}-{asv_history.ENV_NAME}.json"
    planted.symlink_to(victim)
    with pytest.raises(StorageError, match=f"refusing to write {planted}"):
        asv_history.export(state, conf, tmp_path)
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in (results / MACHINE).iterdir()) == sorted(["machine.json", planted.name])
    assert not (results / "benchmarks.json").exists()


def test_a_machine_json_naming_another_folder_does_not_move_the_results(tmp_path):
    """asv files a result by its machine.json's `machine`: `../../outside` would leave the project."""
    conf, results, outside = _project(tmp_path)
    (results / MACHINE / "machine.json").write_text(json.dumps({"machine": "../../../outside", "version": 1}))
    written = asv_history.export(_history(), conf, tmp_path)
    assert all(p.parent == results / MACHINE and p.is_file() for p in written)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("fifo", ["benchmarks.json", "HOST/machine.json"])
def test_a_fifo_in_the_results_folder_is_refused_without_blocking(tmp_path, fifo):
    import platform

    conf, results, _ = _project(tmp_path)
    path = results / fifo.replace("HOST", platform.node())  # this host's folder: where the series goes
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    with _no_hang():
        with pytest.raises(PerfsuiteError, match="not a regular file"):
            asv_history.export(_history(), conf, tmp_path)
        with pytest.raises(PerfsuiteError, match="not a regular file"):
            asv_history.preflight(conf)  # and before a history measures anything
    assert sorted(p.name for p in (results / MACHINE).iterdir()) == ["machine.json"]


def test_another_machines_unreadable_machine_json_is_passed_over_without_blocking(tmp_path):
    """A FIFO (or a folder) as another machine's machine.json is not ours to judge: never waited
    on, never written, and the series goes to the one machine asv can read."""
    conf, results, _ = _project(tmp_path)
    other = results / "other-machine"
    other.mkdir()
    os.mkfifo(other / "machine.json")
    with _no_hang():
        written = asv_history.export(_history(), conf, tmp_path)
    assert written and all(p.parent.name == MACHINE for p in written)
    assert sorted(p.name for p in other.iterdir()) == ["machine.json"]


def test_a_long_parameter_gives_a_bounded_stable_name_that_asv_can_file(tmp_path):
    long_a, long_b = {"n": 64, "tag": "L" * 900}, {"n": 64, "tag": "L" * 899 + "M"}
    name = asv_history.benchmark_name(_history(long_a))
    # asv publish writes graphs/.../<name>.json: one file name, at most 255 bytes.
    assert len(name.encode()) + len(".json") <= 255 and len(name) <= asv_history.MAX_NAME_CHARS
    assert name.startswith("perfsuite_history.w.n_64_tag_LLL")
    assert name == asv_history.benchmark_name(_history(dict(long_a)))  # the same case, the same name
    assert name != asv_history.benchmark_name(_history(long_b))  # two long cases never share one
    assert asv_history.benchmark_name(_history({"n": 1})) == "perfsuite_history.w.n_1"  # short ones as before
    conf, results, _ = _project(tmp_path)
    asv_history.export(_history(long_a), conf, tmp_path)
    assert name in json.loads((results / "benchmarks.json").read_text())


def test_a_refused_export_exits_2_and_says_the_measured_history_is_kept(tmp_path, monkeypatch, capsys):
    """The history measured, its log saved, then the export refused (a machine folder linked out of
    the project after the run began): exit 2, not 0, and the message says nothing is lost."""
    from perfsuite.cli import app
    from perfsuite.cli import history as cli_history
    from perfsuite.jobs.history import HistoryRun

    conf, results, outside = _project(tmp_path)
    log = tmp_path / "h.history.json"

    def measured(*args, **kwargs) -> HistoryRun:
        (results / MACHINE / "machine.json").rename(outside / "machine.json")
        (results / MACHINE).rmdir()
        (results / MACHINE).symlink_to(outside)
        log.write_text("{}")
        return HistoryRun(_history(), log, tmp_path / "h.html", tmp_path)

    monkeypatch.setattr(cli_history, "history", measured)
    monkeypatch.chdir(tmp_path)
    code = app.main(["history", "matmul", "--range", "a..b", "--device", "cpu", "--asv", str(conf)])
    out = capsys.readouterr()
    text = " ".join((out.out + out.err).split())
    assert code == 2, text
    assert "asv: not exported" in text and "nothing measured is lost" in text and str(log) in text
    assert [p.name for p in outside.iterdir()] == ["machine.json"]
