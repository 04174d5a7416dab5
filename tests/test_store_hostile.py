"""What a hostile user tried against the results store, each now refused or shown safely. The
session of 2026-11-28: git options in a commit selector, a password in another process's command
line, a server that stops answering, markup and escapes in stored names, someone else's database,
a device as the store, times in other zones, long selectors. The third session's (FINDINGS F1, F4,
F5, F12, F13): links planted in `.perfsuite/`, rows that are not JSON (read, and pushed from a
spool), a spool damaged mid-file, `store import` of a refused file and of another measurement under
a stored id, a schema revision no perfsuite writes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from dataclasses import replace

import pytest
import sqlalchemy as sa

from perfsuite.cli import app as cli
from perfsuite.database.location import parse, resolve
from perfsuite.database.store import Store
from perfsuite.storage.files import results_document
from tests.records import make_record


def _git_repo(path):
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(path),
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )


def _stored(records, machine="test-machine"):
    from perfsuite.database.machine import Machine
    from perfsuite.database.store import new_run

    m = Machine(machine, machine, "f" * 16, {})
    with Store(resolve()) as store:
        run = new_run("run", m)
        store.begin_run(run, m)
        store.add_records(run["id"], m.id, records)


def test_a_commit_selector_cannot_pass_options_to_git(tmp_path, monkeypatch, capsys):
    _git_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    _stored([make_record(seed=1)])
    victim = tmp_path / "victim.txt"
    victim.write_text("data")
    for argv in (
        ["store", "query", f"--range=--output={victim}"],
        ["store", "query", f"--range=HEAD..--output={victim}"],
        ["export", "csv", f"store:commit=--output={victim}", "--out", "x.csv"],
    ):
        assert cli.main(argv) == 2
        assert "not a revision" in capsys.readouterr().err
    assert victim.read_text() == "data"


def test_passwords_in_other_processes_command_lines_are_hidden():
    from perfsuite.measuring.system import hide_credentials

    line = "python -m perfsuite --store postgresql://ci:s3cret@db:5432/perf run x && psql password=hunter2"
    shown = hide_credentials(line)
    assert "s3cret" not in shown and "hunter2" not in shown
    assert "postgresql://ci:***@db:5432/perf" in shown and "password=***" in shown


def test_a_server_that_stops_answering_is_given_up_and_the_result_spooled(tmp_path):
    from storebackends import postgres_server

    from perfsuite.database.machine import Machine
    from perfsuite.database.recorder import Recorder

    url = postgres_server().create_database(f"frozen_{tmp_path.name[-6:].lower()}".replace("-", "_"))
    loc = resolve(url, cwd=tmp_path)
    rec = Recorder(loc, "run", {}, machine=Machine("m", "m", "f" * 16, {}), cwd=tmp_path)
    rec.write_timeout_s = 0.5
    rec.add_record(make_record(seed=1))
    assert rec.store is not None and not rec.spooled
    stuck = rec.store
    stuck.add_records = lambda *a, **kw: time.sleep(30)  # a write the server never answers
    t = time.monotonic()
    rec.add_record(make_record(seed=2))
    assert time.monotonic() - t < 10 and rec.spooled and rec.store is None
    rec.add_record(make_record(seed=3))
    rec.finish()
    stuck.close()  # the recorder leaves a stuck server's connection alone; the test closes its own
    with Store(resolve(str(loc.spool))) as spool:
        assert len(spool.records()) == 2


def test_stored_names_are_shown_as_written_never_obeyed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _stored([make_record(seed=1, workload="noop[/]"), make_record(seed=2, workload="\x1b]0;pwned\x07[bold]x")])
    assert cli.main(["store", "query", "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["store", "query"]) == 0
    out = capsys.readouterr().out
    assert "noop[/]" in out and "\x1b" not in out and "\x07" not in out and "[bold]x" in out


def test_someone_elses_database_is_never_written_into(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    foreign = tmp_path / "theirs.db"
    engine = sa.create_engine(f"sqlite:///{foreign}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE runs (x INTEGER)"))
    engine.dispose()
    before = foreign.read_bytes()
    assert (
        cli.main(["--store", str(foreign), "run", "matmul", "-p", "n=16", "--max-time", "0.2", "--out", "r.json"]) == 2
    )
    assert "not a perfsuite store" in capsys.readouterr().err and not (tmp_path / "r.json").exists()
    assert cli.main(["--store", str(foreign), "store", "info"]) == 2
    assert foreign.read_bytes() == before


def test_a_device_is_not_a_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert (
        cli.main(["--store", "/dev/null", "run", "matmul", "-p", "n=16", "--max-time", "0.2", "--out", "r.json"]) == 2
    )
    assert "not a regular file" in capsys.readouterr().err


def test_times_are_compared_as_instants_and_bad_ones_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    from dataclasses import replace

    _stored([replace(make_record(seed=1), created="2026-11-28T00:51:00+00:00")])
    assert cli.main(["store", "query", "--since", "2026-11-28T05:00:00+05:00", "--json"]) == 0  # 00:00 UTC
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert cli.main(["store", "query", "--until", "2026-11-27T20:00:00-05:00", "--json"]) == 0  # 01:00 UTC
    assert len(json.loads(capsys.readouterr().out)) == 1
    for bad in ("tomorrow", "2026/11/28"):
        assert cli.main(["store", "query", "--since", bad]) == 2
        assert "expected an ISO date" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "csv", "store:workload=" + "w" * 400, "--out", "x.csv"],
        ["--store", "x" * 10_000, "store", "info"],
    ],
)
def test_long_selectors_and_paths_are_bad_input_not_a_crash(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _stored([make_record(seed=1)])
    assert cli.main(argv) in (0, 2)
    err = capsys.readouterr().err
    assert "internal error" not in err and len(err) < 2000


def test_a_batch_is_found_by_the_id_the_table_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: s\ndevice: cpu\nmax_time: 0.2\nchecks: false\nsuites:\n"
        "  - {name: a, workload: matmul, params: {n: [8, 12, 16]}}\n"
    )
    assert cli.main(["run", "--config", str(suite), "--shard", "1/2", "--out", "o1"]) == 0
    with Store(resolve()) as store:
        batch = store.runs()[0]["batch"]
    capsys.readouterr()
    assert cli.main(["store", "runs", "--batch", batch[:8]]) == 0
    assert "missing [2]" in capsys.readouterr().out


# ---- the third session (/tmp/hostile3/FINDINGS.md) ---------------------------------------------


def _said(captured) -> str:
    """The console's words, however it wrapped them (at a space)."""
    return " ".join((captured.out + captured.err).split())


def _put(store: Store, records) -> None:
    from perfsuite.database.machine import Machine
    from perfsuite.database.store import new_run

    m = Machine("test-machine", "test-machine", "f" * 16, {})
    run = new_run("run", m)
    store.begin_run(run, m)
    store.add_records(run["id"], m.id, records)
    store.finish_run(run["id"], "finished")


def _tamper(db, sql: str, *args) -> None:
    """A row changed behind perfsuite's back, as a hand edit or a damaged disk would."""
    conn = sqlite3.connect(db)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


def _count(db, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_a_default_store_that_is_a_link_is_refused_before_measuring(tmp_path, monkeypatch, capsys):
    """F1: a committed `.perfsuite/results.db` link sent every run's records into a file outside."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFSUITE_STORE")
    victim = tmp_path / "elsewhere" / "victim.db"
    victim.parent.mkdir()
    with Store(resolve(str(victim))) as store:
        _put(store, [make_record(seed=1)])
    before = victim.read_bytes()
    link = tmp_path / ".perfsuite" / "results.db"
    link.parent.mkdir()
    link.symlink_to(victim)
    results = tmp_path / "r.json"
    results.write_text(results_document([make_record(seed=2)]))
    for argv in (
        ["run", "matmul", "-p", "n=16", "--max-time", "0.2", "--out", "out.json"],
        ["store", "import", str(results)],
    ):
        assert cli.main(argv) == 2
        said = _said(capsys.readouterr())
        assert f"refusing to use {link}: it is a symbolic link" in said
    assert not (tmp_path / "out.json").exists()  # refused before anything was measured
    assert victim.read_bytes() == before
    # A link the user names (--store, PERFSUITE_STORE) is theirs to choose: followed.
    assert cli.main(["--store", str(link), "store", "import", str(results)]) == 0
    assert _count(victim, "records") == 2


def test_a_spool_that_is_a_link_is_neither_pushed_nor_emptied(tmp_path, monkeypatch, capsys):
    """F1: `store push` read a linked spool, pushed its runs and deleted them from the file outside."""
    monkeypatch.chdir(tmp_path)
    target = str(tmp_path / "target.db")
    spool = resolve(target).spool
    elsewhere = tmp_path / "elsewhere" / "spool.db"
    elsewhere.parent.mkdir()
    with Store(parse(str(elsewhere), "a test", tmp_path)) as store:
        _put(store, [make_record(seed=1)])
    spool.parent.mkdir()
    spool.symlink_to(elsewhere)
    assert cli.main(["--store", target, "store", "push"]) == 2
    assert f"refusing to use {spool}: it is a symbolic link" in _said(capsys.readouterr())
    assert _count(elsewhere, "runs") == 1
    # A run, which would spool there should the store fail, is refused before it measures.
    assert cli.main(["--store", target, "run", "matmul", "-p", "n=16", "--max-time", "0.2", "--out", "o.json"]) == 2
    assert "symbolic link" in _said(capsys.readouterr()) and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize(
    "column, value, argv",
    [
        ("params", "[1,2", ["store", "query", "matmul"]),
        ("median_s", "fast", ["store", "query", "matmul"]),
        ("doc", "{not json", ["report", "store:workload=matmul", "--out-dir", "rep"]),
        ("doc", "{not json", ["export", "csv", "store:workload=matmul", "--out", "x.csv"]),
    ],
)
def test_a_row_that_is_not_json_is_named_not_a_crash(column, value, argv, tmp_path, monkeypatch, capsys):
    """F4: such a row made every reader exit 4 (JSONDecodeError, TypeError); now exit 2 naming the
    record, as a doc of the wrong shape already was."""
    monkeypatch.chdir(tmp_path)
    rec = make_record(seed=1)
    _stored([rec])
    _tamper(os.environ["PERFSUITE_STORE"], f"UPDATE records SET {column} = ?", value)
    assert cli.main(argv) == 2
    said = _said(capsys.readouterr())
    assert f"record {rec.id}: its {column}" in said and "internal error" not in said


def test_a_document_that_is_not_json_is_named_not_a_crash(tmp_path, monkeypatch):
    from perfsuite.core.errors import RecordError
    from perfsuite.database.machine import Machine
    from perfsuite.database.store import new_run

    monkeypatch.chdir(tmp_path)
    m = Machine("test-machine", "test-machine", "f" * 16, {})
    with Store(resolve()) as store:
        run = new_run("gate", m)
        store.begin_run(run, m)
        store.add_documents(run["id"], m.id, "gate", [{"word": "same"}])
    _tamper(os.environ["PERFSUITE_STORE"], "UPDATE documents SET doc = '{not json'")
    with Store(resolve()) as store, pytest.raises(RecordError, match=r"document \w+: its doc: not JSON"):
        store.documents(kind="gate")


@pytest.mark.parametrize("column, value", [("params", "[1,2"), ("doc", "{not json"), ("median_s", "fast")])
def test_push_keeps_a_run_whose_rows_are_not_records_in_the_spool(
    column, value, store_url, tmp_path, monkeypatch, capsys
):
    """F4: `store push` copied such rows unread into a team's store, where every query then crashed.
    Now each record is read as `store import` reads a file's: a bad run stays in the spool, named."""
    monkeypatch.chdir(tmp_path)
    spool_path = resolve(store_url).spool
    good, bad = make_record(seed=1), make_record(seed=2)
    with Store(parse(str(spool_path), "a test", tmp_path)) as spool:
        _put(spool, [good])
        _put(spool, [bad])
    _tamper(spool_path, f"UPDATE records SET {column} = ? WHERE id = ?", value, bad.id)
    assert cli.main(["--store", store_url, "store", "push"]) == 3
    said = _said(capsys.readouterr())
    assert "kept in the spool" in said and f"record {bad.id}: its {column}" in said
    with Store(resolve(store_url)) as store:
        assert [r.id for r in store.records()] == [good.id]
    assert cli.main(["--store", store_url, "store", "query", "--machine", "all"]) == 0
    assert _count(spool_path, "runs") == 1  # the bad run, kept


@pytest.mark.parametrize("percent", [45, 70])  # found reading a run; found deleting a pushed one
def test_a_spool_damaged_mid_file_is_named_and_nothing_is_pushed_twice(percent, tmp_path, monkeypatch, capsys):
    """F5: `store push` pushed part of such a spool, then exit 4 with SQLAlchemy's traceback."""
    monkeypatch.chdir(tmp_path)
    target = str(tmp_path / "target.db")
    spool_path = resolve(target).spool
    with Store(parse(str(spool_path), "a test", tmp_path)) as spool:
        for seed in range(20):
            _put(spool, [make_record(seed=seed)])
    size = spool_path.stat().st_size
    with open(spool_path, "r+b") as f:  # the header intact, pages in the middle overwritten
        f.seek(size * percent // 100)
        f.write(b"\xde\xad" * 2048)
    assert cli.main(["--store", target, "store", "push"]) == 2
    said = _said(capsys.readouterr())
    assert f"spool {spool_path} is damaged" in said and "run(s) pushed to" in said and "stay in it" in said
    assert "internal error" not in said
    pushed = _count(target, "records")
    assert cli.main(["--store", target, "store", "push"]) == 2
    assert _count(target, "records") == pushed


def test_a_file_named_for_import_that_is_refused_is_bad_input(tmp_path, monkeypatch, capsys):
    """F12: its only record invalid, it was "skipped" and the command exited 0."""
    monkeypatch.chdir(tmp_path)
    doc = json.loads(results_document([make_record(seed=1)]))
    doc["records"][0]["samples_s"][0] = -1
    bad = tmp_path / "res" / "invalid.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(doc))
    assert cli.main(["store", "import", str(bad)]) == 2
    said = _said(capsys.readouterr())
    assert f"refused: {bad}: record 0" in said
    # found in a folder, it is skipped, named: a folder holds other files too
    assert cli.main(["store", "import", str(bad.parent)]) == 0
    assert f"skipped: {bad}: record 0" in _said(capsys.readouterr())


def test_another_measurement_under_a_stored_id_is_kept(tmp_path, monkeypatch, capsys):
    """F12: a record whose id was stored, its content another, was counted "already there" and
    lost; the store keeps a record once by its content (docs/store.md), its id aside."""
    monkeypatch.chdir(tmp_path)
    rec = make_record(seed=1)
    other = replace(rec, warnings=(*rec.warnings, "a different measurement"))
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(results_document([rec]))
    second.write_text(results_document([other]))
    assert cli.main(["store", "import", str(first)]) == 0
    capsys.readouterr()
    assert cli.main(["store", "import", str(second)]) == 0
    said = _said(capsys.readouterr())
    assert "imported 1 new record(s)" in said and "1 of them under an id already stored" in said
    with Store(resolve()) as store:
        back = store.records()
    assert sorted(r.to_dict()["warnings"] for r in back) == sorted([list(rec.warnings), list(other.warnings)])
    assert {r.id for r in back} == {rec.id}  # each keeps its own id
    assert cli.main(["store", "import", str(second)]) == 0  # and the second import adds nothing
    assert "imported 0 new record(s)" in _said(capsys.readouterr())


def test_a_record_an_older_perfsuite_stored_is_not_stored_again_when_imported_again(tmp_path, monkeypatch, capsys):
    """Review of F12's fix: a stored digest is the writing perfsuite's; after an upgrade the same
    record digests otherwise, and re-importing the same file stored every record twice as "another
    measurement". The stored row is digested again with today's code first."""
    monkeypatch.chdir(tmp_path)
    rec = make_record(seed=1)
    f = tmp_path / "a.json"
    f.write_text(results_document([rec]))
    assert cli.main(["store", "import", str(f)]) == 0
    _tamper(os.environ["PERFSUITE_STORE"], "UPDATE records SET digest = ?", "0" * 64)  # an older perfsuite's
    capsys.readouterr()
    assert cli.main(["store", "import", str(f)]) == 0
    assert "imported 0 new record(s)" in _said(capsys.readouterr())
    with Store(resolve()) as store:
        assert len(store.records()) == 1


def test_a_schema_revision_no_perfsuite_writes_is_a_damaged_store_not_a_newer_one(tmp_path, monkeypatch, capsys):
    """F13: 5,000 characters of garbage were "written by a newer perfsuite", and echoed whole."""
    monkeypatch.chdir(tmp_path)
    _stored([make_record(seed=1)])
    db = os.environ["PERFSUITE_STORE"]
    _tamper(db, "UPDATE alembic_version SET version_num = ?", "x" * 5000)
    assert cli.main(["store", "info"]) == 2
    captured = capsys.readouterr()
    said = _said(captured)
    assert "damaged, or not a perfsuite store" in said and "newer perfsuite" not in said
    assert "(5000 characters)" in said and len(captured.err) < 1000
    _tamper(db, "UPDATE alembic_version SET version_num = '0099'")  # a later perfsuite's: as before
    assert cli.main(["store", "info"]) == 2
    assert "written by a newer perfsuite" in _said(capsys.readouterr())
