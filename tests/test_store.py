"""The results store (perfsuite.database) on both engines: writes and queries, idempotent imports,
migrations forward and refusal of a newer schema, concurrent writers and a killed one, a server
that cannot be reached (the spool and `store push`), credentials that are never shown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa

from perfsuite.cli import app as cli
from perfsuite.database import schema
from perfsuite.database.engine import HEAD, StoreError, StoreUnreachable
from perfsuite.database.location import parse, resolve
from perfsuite.database.machine import Machine
from perfsuite.database.recorder import Recorder, push
from perfsuite.database.store import Store, new_run, record_digest
from tests.records import make_record

ROOT = Path(__file__).resolve().parents[1]
MACHINE = Machine("m-test", "test", "f" * 16, {"host": "test"})


def _store(url: str) -> Store:
    return Store(resolve(url))


def _run(store: Store, kind="run", machine=MACHINE, **kw) -> str:
    run = new_run(kind, machine, **kw)
    store.begin_run(run, machine)
    return run["id"]


def test_records_written_are_read_back_whole_and_filtered(store_url):
    with _store(store_url) as store:
        _read_back(store)


def _read_back(store):
    run = _run(store, commit="a" * 40)
    recs = [
        make_record(seed=i, params={"n": n, "dtype": "fp32"}, env={"git_commit": c, "host": "test"})
        for i, (n, c) in enumerate([(16, "a" * 40), (32, "a" * 40), (16, "b" * 40)])
    ]
    assert store.add_records(run, MACHINE.id, recs) == 3
    back = store.records()
    assert [r.to_dict() for r in back] == [r.to_dict() for r in recs]  # nothing lost, nothing changed
    assert len(store.rows(params={"n": 16})) == 2
    assert len(store.rows(commits=["b" * 40])) == 1
    assert store.rows(machine="another") == []
    assert store.rows(workload="matmul")[0]["median_s"] == pytest.approx(recs[0].median_s)
    assert store.runs()[0]["records"] == 3


def test_writing_twice_adds_nothing(store_url):
    with _store(store_url) as store:
        _write_twice(store)


def _write_twice(store):
    run = _run(store)
    rec = make_record(seed=3)
    assert store.add_records(run, MACHINE.id, [rec]) == 1
    assert store.add_records(run, MACHINE.id, [rec]) == 0
    # the same measurement under another id (a second import of a copied file): one row
    from dataclasses import replace

    assert store.add_records(run, MACHINE.id, [replace(rec, id="0" * 32)]) == 0
    assert store.counts()["records"] == 1
    assert store.add_documents(run, MACHINE.id, "pair", [{"ratio": 1.02}]) == 1
    assert store.add_documents(run, MACHINE.id, "pair", [{"ratio": 1.02}]) == 0


def _pytest_benchmark_file(path: Path) -> Path:
    import numpy as np

    data = [float(x) for x in 1e-3 * np.random.default_rng(1).lognormal(0, 0.03, 50)]
    path.write_text(
        json.dumps(
            {
                "machine_info": {"perfsuite": {"torch": "2.14.1", "host": "ci-runner-7"}},
                "benchmarks": [
                    {
                        "name": "test_workload[matmul]",
                        "group": "matmul",
                        "stats": {"data": data, "iterations": 1},
                        "extra_info": {"params": {"n": 256}, "device": "cpu"},
                    }
                ],
            }
        )
    )
    return path


def _asv_file(path: Path) -> Path:
    import numpy as np

    rng = np.random.default_rng(2)
    samples = [list(1e-3 * rng.lognormal(0, 0.03, 20)), list(2e-3 * rng.lognormal(0, 0.03, 20))]
    columns = [
        "result",
        "params",
        "version",
        "started_at",
        "duration",
        "stats_ci_99_a",
        "stats_ci_99_b",
        "stats_q_25",
        "stats_q_75",
        "stats_number",
        "stats_repeat",
        "samples",
        "profile",
    ]
    path.write_text(
        json.dumps(
            {
                "commit_hash": "abc",
                "env_name": "virtualenv-py3.11",
                "params": {"torch": "2.14.1"},
                "result_columns": columns,
                "results": {
                    "bench_matmul.MatmulTime.time_step": [
                        [1e-3, 2e-3],
                        [["256"], ["'fp32'", "'bf16'"]],
                        "v",
                        0,
                        1,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        samples,
                    ]
                },
            }
        )
    )
    return path


def test_import_takes_perfsuite_asv_and_pytest_benchmark_files_once(store_url, tmp_path, capsys):
    stored = ROOT / "tests" / "data" / "stored"
    inputs = [
        str(stored / "results-schema3.json"),
        str(_asv_file(tmp_path / "asv.json")),
        str(stored / "pair-doc1.json"),
        str(_pytest_benchmark_file(tmp_path / "pb.json")),
    ]
    assert cli.main(["--store", store_url, "store", "import", *inputs]) == 0
    first = capsys.readouterr().out
    with _store(store_url) as store:
        counts = store.counts()
        machines = {m["name"] for m in store.machines()}
    assert counts["records"] > 3 and counts["documents"] >= 1
    assert "ci-runner-7 (imported)" in machines  # the pytest file's machine, kept apart
    assert cli.main(["--store", store_url, "store", "import", *inputs]) == 0
    assert "imported 0 new record(s) and 0 document(s)" in capsys.readouterr().out
    with _store(store_url) as store:
        assert store.counts() == counts
    assert "imported" in first


def _at_revision(url: str, revision: str) -> None:
    from alembic import command

    from perfsuite.database.engine import _config, engine_for

    engine = engine_for(resolve(url))
    with engine.begin() as conn:
        command.upgrade(_config(conn), revision)
    engine.dispose()


def test_an_older_store_is_migrated_forward_and_keeps_its_rows(store_url):
    _at_revision(store_url, "0001")
    engine = sa.create_engine(resolve(store_url).url)
    with engine.begin() as conn:  # a run of the first schema: no batch, no documents table
        conn.execute(sa.text("INSERT INTO machines VALUES ('m-old', 'old', 'x', '{}', '2026-01-01')"))
        conn.execute(
            sa.text(
                "INSERT INTO runs (id, kind, machine_id, config, started, state) "
                "VALUES ('r-old', 'run', 'm-old', '{}', '2026-01-01', 'finished')"
            )
        )
        assert "documents" not in sa.inspect(conn).get_table_names()
    engine.dispose()
    with _store(store_url) as store:
        assert [r["id"] for r in store.runs()] == ["r-old"]
        assert store.runs()[0]["batch"] is None
        run = _run(store)
        assert store.add_documents(run, MACHINE.id, "gate", [{"word": "same"}]) == 1
        with store.engine.connect() as conn:
            from perfsuite.database.engine import current_revision

            assert current_revision(conn) == HEAD


def test_a_store_of_a_newer_schema_is_refused_before_measuring(store_url, tmp_path, capsys, monkeypatch):
    _at_revision(store_url, "head")
    engine = sa.create_engine(resolve(store_url).url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    with pytest.raises(StoreError, match="newer perfsuite"):
        _store(store_url)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.json"
    assert cli.main(["--store", store_url, "run", "matmul", "-p", "n=16", "--max-time", "0.3", "--out", str(out)]) == 2
    assert "newer perfsuite" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was measured or claimed


def test_a_corrupted_sqlite_file_is_named_and_nothing_is_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "results.db"
    bad.write_bytes(b"PK\x03\x04 not a database" * 100)
    assert (
        cli.main(
            ["--store", str(bad), "run", "matmul", "-p", "n=16", "--max-time", "0.3", "--out", str(tmp_path / "r.json")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "not a SQLite database" in err and "store import" in err
    assert not (tmp_path / "r.json").exists()
    # a valid header over a damaged body: the first query says so, as an error, not a traceback
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    assert cli.main(["--store", str(bad), "store", "info"]) == 2
    assert "store" in capsys.readouterr().err


def test_wrong_credentials_are_refused_and_never_printed(tmp_path, capsys, monkeypatch):
    from storebackends import postgres_server

    server = postgres_server()
    url = server.url(password="hunter2-wrong")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--store", url, "run", "matmul", "-p", "n=16", "--max-time", "0.3"]) == 2
    err = capsys.readouterr().err
    assert "refused the credentials" in err and "hunter2-wrong" not in err and "***" in err
    assert not (tmp_path / "results").exists()
    assert cli.main(["--store", server.url(), "store", "info"]) == 2  # an empty database: no store yet
    shown = capsys.readouterr()
    assert "no store there yet" in shown.err
    assert server.url().split(":")[2].split("@")[0] not in shown.out + shown.err  # the right one neither


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_server_keeps_the_measurement_in_the_spool_until_pushed(tmp_path, capsys, monkeypatch):
    import pgserver
    from storebackends import postgres_server

    postgres_server()  # skips, saying why, where PostgreSQL cannot run
    monkeypatch.chdir(tmp_path)
    port = _closed_port()
    url = f"postgresql://{pgserver.USER}:{pgserver.PASSWORD}@127.0.0.1:{port}/{pgserver.DATABASE}"
    assert cli.main(["--store", url, "run", "matmul", "-p", "n=16", "--max-time", "0.3"]) == 0
    err = capsys.readouterr().err
    assert "cannot reach the server" in err and "perfsuite store push" in err and pgserver.PASSWORD not in err
    spool_path = parse(url, "t", tmp_path).spool
    with Store(parse(str(spool_path), "t", tmp_path)) as spool:
        (kept,) = spool.records()
        assert spool.runs()[0]["state"] == "finished"
    # The server comes up at that address: push sends the run whole, once.
    server = pgserver.Server(port=port).start()
    try:
        assert cli.main(["--store", url, "store", "push"]) == 0
        assert "pushed 1 run(s): 1 new record(s)" in capsys.readouterr().out
        with _store(url) as store:
            assert [r.id for r in store.records(machine="test-machine")] == [kept.id]
            assert store.runs()[0]["state"] == "finished"
        assert cli.main(["--store", url, "store", "push"]) == 0
        assert "nothing pushed" in capsys.readouterr().out
        with _store(url) as store:
            assert store.counts()["records"] == 1
    finally:
        server.stop()


def test_push_waits_for_a_command_still_writing_to_the_spool(tmp_path):
    """A push while a command spools would take the run from under it: refused until it ends."""
    down = parse(f"postgresql://u:p@127.0.0.1:{_closed_port()}/d", "t", tmp_path)
    rec = Recorder(down, "run", {}, machine=MACHINE, cwd=tmp_path)
    rec.add_record(make_record(seed=1))
    assert rec.spooled
    with pytest.raises(StoreError, match="still writing to it"):
        push(down)
    rec.add_record(make_record(seed=2))
    rec.finish()
    with Store(parse(str(down.spool), "t", tmp_path)) as spool:
        assert len(spool.records()) == 2 and spool.runs()[0]["state"] == "finished"


def test_a_connection_lost_mid_run_is_retried_then_spooled(tmp_path, monkeypatch):
    store_path = tmp_path / "main.db"
    rec = Recorder(
        resolve(str(store_path), cwd=tmp_path),
        "run",
        {},
        machine=MACHINE,
        cwd=tmp_path,
        sleep=lambda s: waits.append(s),
    )
    waits: list[float] = []
    rec.add_record(make_record(seed=1))
    assert rec.store is not None and not rec.spooled
    calls = []

    def dropped(self, *a, **kw):
        calls.append(1)
        raise StoreUnreachable("store x: cannot reach the server (connection reset)")

    monkeypatch.setattr(rec.store, "add_records", dropped.__get__(rec.store))  # the server's store alone
    rec.add_record(make_record(seed=2))
    assert len(calls) == 3 and len(waits) == 2  # tried three times, waiting between
    assert rec.spooled
    rec.add_record(make_record(seed=3))
    rec.finish()
    assert any("store push" in n for n in rec.notes)
    spool_path = resolve(str(store_path), cwd=tmp_path).spool
    assert spool_path.name.startswith("spool-")  # one spool per store
    with Store(resolve(str(store_path))) as main, Store(resolve(str(spool_path))) as spool:
        assert len(main.records()) == 1 and len(spool.records()) == 2
    assert push(resolve(str(store_path), cwd=tmp_path)) == (1, 2, 0, [])
    with Store(resolve(str(store_path))) as main:
        assert len(main.records()) == 3 and main.runs()[0]["state"] == "finished"


WRITER = textwrap.dedent("""
    import sys
    sys.path[:0] = [{root!r}, {tests!r}]
    from perfsuite.database.location import resolve
    from perfsuite.database.machine import Machine
    from perfsuite.database.store import Store, new_run
    from records import make_record
    url, who, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    m = Machine(f"m{{who}}", f"w{{who}}", "f" * 16, {{}})
    store = Store(resolve(url))
    run = new_run("run", m)
    store.begin_run(run, m)
    for i in range(n):
        store.add_records(run["id"], m.id, [make_record(seed=who * 1000 + i, n=20)])
        store.add_records(run["id"], m.id, [make_record(seed=999_999, n=20)])  # one measurement, every writer
    store.finish_run(run["id"], "finished")
""")


@pytest.mark.slow
def test_several_processes_writing_at_once_lose_nothing(store_url, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(root=str(ROOT), tests=str(ROOT / "tests")))
    _store(store_url).close()  # migrated once; the writers race on the rows, not on the schema
    procs = [
        subprocess.Popen([sys.executable, str(script), store_url, str(w), "15"], stderr=subprocess.PIPE)
        for w in range(6)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    with _store(store_url) as store:
        rows = store.rows(machine=[f"m{w}" for w in range(6)])
        assert len(rows) == 91  # 6 x 15 of their own, and the one all six wrote: once
        assert {r["state"] for r in store.runs()} == {"finished"}


KILLED = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [{root!r}, {tests!r}]
    from perfsuite.database.location import resolve
    from perfsuite.database.machine import Machine
    from perfsuite.database.store import Store, new_run, _record_row
    from perfsuite.database import schema
    from records import make_record
    m = Machine("m-killed", "k", "f" * 16, {{}})
    store = Store(resolve(sys.argv[1]))
    run = new_run("run", m)
    store.begin_run(run, m)
    with store._write() as conn:  # one run's results in one transaction, killed before it commits
        for i in range(200):
            conn.execute(schema.records.insert(), [_record_row(make_record(seed=i, n=20), run["id"], m.id)])
        print("inserted", flush=True)
        time.sleep(120)
""")


@pytest.mark.slow
def test_a_writer_killed_mid_transaction_leaves_no_half_written_results(store_url, tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED.format(root=str(ROOT), tests=str(ROOT / "tests")))
    p = subprocess.Popen([sys.executable, str(script), store_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode().strip()
    os.kill(p.pid, signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert line == "inserted", err.decode()[-2000:]
    with _store(store_url) as store:
        assert store.rows(machine="m-killed") == []
        run = _run(store)  # and the store takes the next writer at once
        assert store.add_records(run, MACHINE.id, [make_record(seed=1)]) == 1


def test_every_record_digest_ignores_only_its_id_and_time():
    from dataclasses import replace

    a = make_record(seed=1)
    assert record_digest(a) == record_digest(replace(a, id="x", created="2020-01-01"))
    assert record_digest(a) != record_digest(make_record(seed=2))


def test_schema_module_and_migrations_describe_the_same_tables(tmp_path):
    """schema.py is head; the migrations must build exactly it (columns of every table), and
    database.REVISIONS must be Alembic's own list of them."""
    from alembic.script import ScriptDirectory

    from perfsuite.database.engine import REVISIONS, _config

    scripts = ScriptDirectory.from_config(_config())
    assert tuple(reversed([r.revision for r in scripts.walk_revisions()])) == REVISIONS
    url = str(tmp_path / "m.db")
    _at_revision(url, "head")
    engine = sa.create_engine(resolve(url).url)
    inspector = sa.inspect(engine)
    for table in schema.metadata.sorted_tables:
        migrated = {c["name"] for c in inspector.get_columns(table.name)}
        assert migrated == {c.name for c in table.columns}, table.name
    engine.dispose()


def test_a_user_who_may_not_create_the_tables_is_told_before_measuring(tmp_path, capsys, monkeypatch):
    """PostgreSQL 15 lets only a database's owner create tables in its public schema."""
    import psycopg
    from storebackends import postgres_server

    server = postgres_server()
    name = f"owned_{os.getpid()}_{tmp_path.name[-6:].lower()}".replace("-", "_")
    server.create_database(name)
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE r_{name} LOGIN PASSWORD 'reader-pw'")
    url = server.url(name).replace("perfsuite:" + server.url().split(":")[2].split("@")[0], f"r_{name}:reader-pw")
    monkeypatch.chdir(tmp_path)
    assert (
        cli.main(
            ["--store", url, "run", "matmul", "-p", "n=16", "--max-time", "0.3", "--out", str(tmp_path / "r.json")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "create tables in the public schema" in err and "reader-pw" not in err
    assert not (tmp_path / "r.json").exists()


def test_a_password_in_the_urls_query_is_hidden_too():
    loc = parse("postgresql://ci@db.internal:5432/perf?password=q-secret&sslmode=require", "t", Path("."))
    assert "q-secret" not in loc.shown and "sslmode=require" in loc.shown and loc.secrets == ["q-secret"]
    from perfsuite.database.engine import describe_failure

    class Orig(Exception):
        sqlstate = "28P01"

    err = sa.exc.OperationalError("connect", {}, Orig('password "q-secret" authentication failed'))
    assert "q-secret" not in str(describe_failure(loc, err)) and "refused the credentials" in str(
        describe_failure(loc, err)
    )


def test_a_value_a_column_cannot_hold_is_stored_not_a_crash(store_url):
    """A NUL or a lone surrogate in a name, an id of 200 characters, a commit that is not a hash:
    the columns get a safe form, the record's JSON keeps the value."""
    from dataclasses import replace

    odd = replace(
        make_record(seed=5, workload="mat\x00mul", env={"git_commit": "not a hash", "git_dirty": "yes"}), id="x" * 200
    )
    with _store(store_url) as store:
        run = _run(store)
        assert store.add_records(run, MACHINE.id, [odd]) == 1
        (back,) = store.records()
        (row,) = store.rows()
    assert back.id == "x" * 200 and back.workload == odd.workload
    assert row["commit"] is None and row["dirty"] is None and "\x00" not in row["workload"]
    from perfsuite.database.store import column_text

    assert column_text("a\udc80b", 10) == "a\\udc80b"  # a lone surrogate, spelled out


def test_a_new_store_made_at_head_is_the_one_the_migrations_make(tmp_path):
    """A new store is created from schema.py and stamped (no Alembic); the migrations from empty
    must give the same tables, columns and indexes."""
    made, migrated = str(tmp_path / "made.db"), str(tmp_path / "migrated.db")
    Store(resolve(made)).close()
    _at_revision(migrated, "head")

    def shape(url):
        engine = sa.create_engine(resolve(url).url)
        inspector = sa.inspect(engine)
        out = {
            t: (
                {c["name"] for c in inspector.get_columns(t)},
                {(i["name"], tuple(i["column_names"])) for i in inspector.get_indexes(t)},
            )
            for t in inspector.get_table_names()
        }
        with engine.connect() as conn:
            out["version"] = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        engine.dispose()
        return out

    assert shape(made) == shape(migrated)


def test_every_worktree_of_a_repository_shares_the_default_store(tmp_path, monkeypatch):
    """Issue 50: each `git worktree add` checkout got its own .perfsuite/results.db unless
    PERFSUITE_STORE was set; the default store is the main worktree's, from any of them (the same
    sub-folder when the project lives in one)."""
    import subprocess

    from perfsuite.database.location import ENV, resolve

    monkeypatch.delenv(ENV, raising=False)  # the default store, as a user has it
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    main = tmp_path / "repo"
    (main / "proj").mkdir(parents=True)
    (main / "proj" / "pyproject.toml").write_text("[tool.perfsuite]\nworkloads = []\n")
    subprocess.run(["git", "init", "-q"], cwd=main, check=True)
    subprocess.run([*git, "add", "-A"], cwd=main, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=main, check=True)
    subprocess.run(["git", "worktree", "add", "-q", str(tmp_path / "linked")], cwd=main, check=True)
    want = main / "proj" / ".perfsuite" / "results.db"
    assert resolve(cwd=main / "proj").path == want
    assert resolve(cwd=tmp_path / "linked" / "proj").path == want
    # Outside any repository: beside the project, as before.
    (tmp_path / "plain").mkdir()
    assert resolve(cwd=tmp_path / "plain").path == tmp_path / "plain" / ".perfsuite" / "results.db"
