"""What a hostile user tried against the results store (session of 2026-11-28), each now refused
or shown safely: git options in a commit selector, a password in another process's command line,
a server that stops answering, markup and escapes in stored names, someone else's database,
a device as the store, times in other zones, long selectors."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import sqlalchemy as sa

from perfsuite.cli import app as cli
from perfsuite.database.location import resolve
from perfsuite.database.store import Store
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
