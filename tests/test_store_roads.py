"""Every road writes to the results store, and the readers read `store:` sources: run, a suite
(and its shards), pair, the pytest and asv front-ends; compare, report and export from the store;
machines kept apart unless asked; a password in a readable config file warned about."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from perfsuite.cli import app as cli
from perfsuite.database.location import resolve
from perfsuite.database.shards import in_shard, shard_of
from perfsuite.database.store import Store
from tests.records import make_record


def _store() -> Store:
    return Store(resolve())  # conftest's PERFSUITE_STORE: this test's own


def test_run_and_pair_write_their_results_with_the_machine_and_commit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"], check=True
    )
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert cli.main(["run", "matmul", "-p", "n=16,24", "--max-time", "0.3", "--out", "r.json"]) == 0
    assert cli.main(["pair", "matmul", "-p", "n=16", "--vary", "dtype=fp32,bf16", "--budget", "0.5"]) == 0
    with _store() as store:
        runs = {r["kind"]: r for r in store.runs()}
        rows = store.rows()
        (pair,) = store.documents(kind="pair")
    assert set(runs) == {"run", "pair"} and all(r["state"] == "finished" for r in runs.values())
    assert runs["run"]["commit"] == head and runs["run"]["machine_id"] == "test-machine"
    assert runs["run"]["records"] == 2 and {r["params"]["n"] for r in rows} == {16, 24}
    # A pair's result is a document: its run counts it (issue 50: such runs listed "records 0").
    assert runs["pair"]["documents"] == 1 and runs["run"]["documents"] == 0
    assert all(r["commit"] == head for r in rows)
    assert pair["workload"] == "matmul" and pair["doc"]["case"] == {"n": 16}
    # the file and the store hold the same measurements
    from perfsuite.storage.files import load_records

    assert {r.id for r in load_records("r.json")} == {r["id"] for r in rows}


SUITE = """
name: sharded
device: cpu
max_time: 0.2
checks: false
suites:
  - {name: a, workload: matmul, params: {n: [8, 12, 16, 20, 24]}}
  - {name: b, workload: matmul, params: {n: [8, 12], dtype: [fp32]}}
"""


def test_shards_split_a_suite_into_disjoint_parts_the_store_joins(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    for k in (1, 2):
        assert cli.main(["run", "--config", str(suite), "--shard", f"{k}/2", "--out", f"out{k}"]) == 0
    with _store() as store:
        runs = store.runs(kind="suite")
        assert len(runs) == 2 and runs[0]["batch"] == runs[1]["batch"] and {r["shard"] for r in runs} == {1, 2}
        batch = runs[0]["batch"]
        rows = store.rows(batch=batch)
    # each case exactly once across the shards: a 5 + 2 = 7 cases, 7 records
    assert sorted((r["params"]["n"]) for r in rows) == sorted([8, 12, 16, 20, 24, 8, 12])
    assert len({r["id"] for r in rows}) == 7
    capsys.readouterr()
    assert cli.main(["store", "runs", "--batch", batch]) == 0
    assert "shards [1, 2] of 2; complete" in capsys.readouterr().out
    # the folder of a shard resumes as that shard only
    assert cli.main(["run", "--config", str(suite), "--shard", "2/2", "--out", "out1"]) == 2


def test_a_case_is_in_one_shard_the_same_one_every_time():
    cases = [("e", {"n": n, "dtype": d}) for n in range(40) for d in ("fp32", "bf16")]
    for n in (1, 2, 3, 7):
        owners = [[k for k in range(1, n + 1) if in_shard(e, p, k, n)] for e, p in cases]
        assert all(len(o) == 1 for o in owners)
        assert [shard_of(e, p, n) for e, p in cases] == [o[0] for o in owners]
    # spread: no shard of 4 is empty for 80 cases, and parameter order does not matter
    assert {shard_of(e, p, 4) for e, p in cases} == {1, 2, 3, 4}
    assert shard_of("e", {"a": 1, "b": 2}, 5) == shard_of("e", {"b": 2, "a": 1}, 5)


def test_shard_needs_a_suite_and_a_valid_k_of_n(capsys):
    assert cli.main(["run", "matmul", "--shard", "1/2"]) == 2
    assert "--shard applies to a suite run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", "--suite", "ci", "--shard", "3/2"])


def _write(machine: str, records) -> None:
    from perfsuite.database.machine import Machine
    from perfsuite.database.store import new_run

    m = Machine(machine, machine, "f" * 16, {})
    with _store() as store:
        run = new_run("run", m)
        store.begin_run(run, m)
        store.add_records(run["id"], m.id, records)


def test_store_sources_read_this_machines_records_unless_all_are_asked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _write(
        "test-machine",
        [
            make_record(seed=1, env={"git_commit": "a" * 40}),
            make_record(median_s=1.3e-3, seed=2, env={"git_commit": "b" * 40}),
        ],
    )
    _write("gpu-box", [make_record(median_s=0.2e-3, seed=3, env={"git_commit": "b" * 40})])
    from perfsuite.storage.files import load_many

    mine, _ = load_many(["store:"])
    assert len(mine) == 2
    everyone, _ = load_many(["store:machine=all"])
    assert len(everyone) == 3
    (other,), _ = load_many(["store:machine=gpu-box"])
    assert other.median_s == pytest.approx(0.2e-3, rel=0.1)
    # compare two commits of this machine, straight from the store: a 30% slowdown
    assert cli.main(["compare", "store:aaaa", "store:bbbb"]) == 1
    assert "slower" in capsys.readouterr().out
    assert cli.main(["export", "csv", "store:", "--out", "t.csv"]) == 0
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 3  # a row per record of this machine
    assert cli.main(["report", "store:", "--out-dir", "rep"]) == 0
    assert "matmul" in (tmp_path / "rep" / "summary.md").read_text()
    capsys.readouterr()
    assert cli.main(["store", "query", "matmul", "-p", "n=256", "--machine", "all", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    assert cli.main(["store", "query", "--range", "bbbb"]) == 0
    assert "1 record(s)" in capsys.readouterr().out


def test_a_bad_store_source_is_a_clear_error(capsys):
    assert cli.main(["export", "csv", "store:colour=blue", "--out", "x.csv"]) == 2
    assert "expected store:KEY=VALUE" in capsys.readouterr().err


def test_the_front_ends_write_their_runs_with_asvs_commit(monkeypatch):
    from benchmarks._suite import measure_cases
    from perfsuite.core import config, registry
    from perfsuite.frontends.pytest_plugin import measure_record

    monkeypatch.setattr(config, "resolve_device", lambda spec: "cpu")
    monkeypatch.setenv("ASV_COMMIT", "c" * 40)
    monkeypatch.setenv("ASV_CONF_DIR", str(Path.cwd()))
    (asv,) = measure_cases("noop", {}, max_time=0.3).values()
    monkeypatch.delenv("ASV_COMMIT")
    rec = measure_record(registry.get("noop"), {}, "cpu", 0.3)
    with _store() as store:
        runs = {r["kind"]: r for r in store.runs()}
        rows = {r["run_id"]: r for r in store.rows()}
    assert runs["asv"]["commit"] == "c" * 40 and rows[runs["asv"]["id"]]["id"] == asv["id"]
    assert rows[runs["asv"]["id"]]["commit"] == "c" * 40
    assert rows[runs["pytest"]["id"]]["id"] == rec.id


def test_a_password_in_a_config_file_others_can_read_is_warned_about_and_never_stored(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PERFSUITE_STORE")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.perfsuite]\nstore = "postgresql://ci:s3cr3t-pw@127.0.0.1:1/perfsuite"\n'
    )
    os.chmod(tmp_path / "pyproject.toml", 0o644)
    warned = []
    loc = resolve(warn=warned.append)
    assert loc.is_server and "s3cr3t-pw" not in loc.shown and warned and "~/.pgpass" in warned[0]
    capsys.readouterr()
    cli.main(["store", "info"])  # the store actions warn too, not only the measuring commands
    assert "~/.pgpass" in capsys.readouterr().err
    os.chmod(tmp_path / "pyproject.toml", stat.S_IRUSR | stat.S_IWUSR)
    warned.clear()
    resolve(warn=warned.append)
    assert warned == []
    # a store URL given on the command line never reaches what the store keeps
    import pgserver
    from storebackends import postgres_server

    (tmp_path / "pyproject.toml").unlink()
    url = postgres_server().create_database(f"pw_{os.getpid()}_{tmp_path.name[-6:].lower()}".replace("-", "_"))
    assert cli.main(["--store", url, "run", "matmul", "-p", "n=16", "--max-time", "0.2"]) == 0
    with Store(resolve(url)) as store:
        (run,) = store.runs()
        import sqlalchemy as sa

        with store.engine.connect() as conn:
            everything = [
                str(v)
                for t in ("machines", "runs", "records", "documents")
                for row in conn.execute(sa.text(f"SELECT * FROM {t}"))
                for v in row
            ]
    assert json.loads(run["config"])["workload"] == ["matmul"]  # run takes several
    assert everything and not any(pgserver.PASSWORD in v for v in everything)


@pytest.mark.parametrize(
    "text, message",
    [
        ("mysql://x@y/z", "SQLite path or a postgresql:// URL"),
        ("postgresql://u@h:5432/", "names no database"),
        ("sqlite:///:memory:", "needs a file"),
        ("", "SQLite path or a postgresql"),
    ],
)
def test_a_bad_store_url_names_itself(text, message):
    from perfsuite.core.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        resolve(text)


def test_reading_a_store_that_does_not_exist_says_so_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "nowhere" / "results.db"
    for argv in (["store", "info"], ["store", "query"], ["export", "csv", "store:", "--out", "x.csv"]):
        assert cli.main(["--store", str(missing), *argv]) == 2
        assert "no store there yet" in capsys.readouterr().err
    assert not missing.parent.exists()


def test_asv_finds_the_projects_store_from_its_temporary_folder(tmp_path, monkeypatch):
    """asv runs each benchmark in a temporary folder: the store is the project's (ASV_CONF_DIR)."""
    from benchmarks._suite import measure_cases
    from perfsuite.core import config

    project, elsewhere = tmp_path / "project", tmp_path / "asv-tmp"
    project.mkdir(), elsewhere.mkdir()
    monkeypatch.delenv("PERFSUITE_STORE")
    monkeypatch.setattr(config, "resolve_device", lambda spec: "cpu")
    monkeypatch.setenv("ASV_CONF_DIR", str(project))
    monkeypatch.chdir(elsewhere)
    measure_cases("noop", {}, max_time=0.2)
    assert (project / ".perfsuite" / "results.db").exists() and not (elsewhere / ".perfsuite").exists()
