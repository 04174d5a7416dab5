"""Hostile input on the run and history roads (issue 51, item 3), found by a hostile user on
2026-11-30 (reports/hostile/round5.md): a results file that cannot be written during the run, and
history logs edited by hand or holding what git allows and a log does not."""

from __future__ import annotations

import json

import pytest

from perfsuite.cli import app as cli
from perfsuite.core.errors import StorageError
from perfsuite.storage import files


def test_a_results_file_the_disk_cannot_hold_still_leaves_the_record_in_the_store(tmp_path, monkeypatch, capsys):
    """The disk under results/ filled while the case was measured: the file's error stopped the
    run before the store was given the record, so the measurement was lost (exit 2, store empty).
    Now every output gets it first; the error says where it is kept."""
    monkeypatch.chdir(tmp_path)

    def full_disk(path, text):
        raise StorageError(f"cannot write {path}: [Errno 28] No space left on device")

    monkeypatch.setattr(files, "atomic_write_text", full_disk)
    code = cli.main(["run", "noop", "--max-time", "0.2", "--processes", "1", "--out", "r.json"])
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and "kept in the results store" in err, err
    monkeypatch.undo()
    monkeypatch.setenv("PERFSUITE_STORE", str(tmp_path / "store" / "results.db"))
    monkeypatch.setenv("PERFSUITE_MACHINE", "test-machine")
    assert cli.main(["store", "query", "noop", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["workload"] == "noop", rows


def _logged_state():
    """A walked history of 4 commits (the fakes of tests/test_history.py), as its log holds it."""
    from test_history import _pairer, _state

    from perfsuite.compare.history_walk import walk

    state = _state(4)
    pair, _ = _pairer(state, {2: 1.5})
    walk(state, pair, {})
    return state, state.to_dict()


def _load(tmp_path, doc):
    from perfsuite.compare.kinds import load_result
    from perfsuite.storage.files import document

    f = tmp_path / "w.history.json"
    f.write_text(document("history", [doc]))
    return load_result(f, "history")


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d["points"][0]["verdict"]["run"].update(ratios=[]), "ratios is empty"),
        (lambda d: d["points"].append(dict(d["points"][1])), "measured twice"),
        (lambda d: d["points"][1].update(sha="d" * 40), "not a commit of the history's range"),
        (lambda d: d["points"].reverse(), "out of the range's order"),
        (lambda d: d["points"][1].update(parent=d["commits"][3]["sha"]), "neither the range's start"),
    ],
    ids=["empty-ratios", "duplicate-point", "foreign-commit", "reversed", "parent-after-its-point"],
)
def test_a_history_log_edited_against_its_own_walk_is_refused_naming_the_point(tmp_path, edit, named):
    """Issue 51: each of these was accepted and the log rewritten (the empty ratios then crashed
    the page, exit 4; the others chained the trajectory wrong). Refused now, naming the point."""
    state, doc = _logged_state()
    assert _load(tmp_path, doc)[0].same_question(state)  # the log as the walk left it loads
    edit(doc)
    with pytest.raises(Exception, match=named) as got:
        _load(tmp_path, doc)
    assert "w.history.json" in str(got.value)


def test_a_commit_subject_git_allows_is_kept_short_never_refused():
    """A 150,000-character subject (valid in git) made every history across the commit fail the
    log's validation, naming no commit; a 100,000-character one was printed whole."""
    from perfsuite.compare.bisection import SUBJECT_CHARS, Commit

    c = Commit("a" * 40, "C" * 150_000)
    assert len(c.subject) == SUBJECT_CHARS and c.subject.endswith("\u2026")
    assert Commit("a" * 40, "short").subject == "short"
    with pytest.raises(Exception, match="subject"):
        Commit.from_dict({"sha": "a" * 40, "subject": 5})  # another type is still refused


def test_a_range_longer_than_a_log_holds_is_refused_with_its_size_and_a_range_that_fits(
    tmp_path, capsys, monkeypatch, forget_workloads
):
    """10,001 commits: pydantic's words ("list should have at most 10000 items") were the message,
    also with --every (which cannot shorten a log's range). Now the size, the limit and a range."""
    import subprocess

    repo = tmp_path / "long"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    files = {
        "pyproject.toml": '[project]\nname = "p"\nversion = "0"\n\n[tool.perfsuite]\nworkloads = ["bench"]\n',
        "bench/w.py": "import perfsuite\n\n\n@perfsuite.workload()\ndef w(device: str):\n"
        "    return perfsuite.Step(lambda: None)\n",
    }
    stream = []
    for i in range(10_002):
        stream.append(f"commit refs/heads/main\nmark :{i + 1}\ncommitter t <t@t> {1_700_000_000 + i} +0000\n")
        stream.append(f"data 3\nc{i % 10}\n" + (f"from :{i}\n" if i else ""))
        if i == 0:
            stream += [f"M 644 inline {p}\ndata {len(t.encode())}\n{t}\n" for p, t in files.items()]
        stream.append("\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input="".join(stream), text=True, check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    argv = ["history", "w", "--range", "main~10001..main", "--device", "cpu", "--every", "1000"]
    monkeypatch.chdir(repo)
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "10001 commits after" in err and "10000 one history log holds" in err, err
    assert "list should have" not in err and "~10000.." in err
