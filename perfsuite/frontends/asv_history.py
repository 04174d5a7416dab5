"""A paired history written into asv's results, so that `asv publish` draws it.

asv draws one value per commit and benchmark. The paired history's value for a commit is the
time of the range's start (its median seconds per step, from the first pair) times the chained
ratio up to that commit: a series in seconds that a change of machine speed between commits does
not move, beside the separate runs asv measured itself. It is a `track` benchmark named
`perfsuite_history.<workload>.<case>` with its own environment name, so the two series never
mix; `benchmarks.json` gets its description (asv publish skips results of benchmarks it does
not know). `asv run` rewrites that list with the benchmarks it discovers, dropping this one until
the next export re-adds it: in CI, export after `asv run` (each export writes the whole series).
Written through asv's own `Results` class, so the files are asv's format.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from perfsuite.compare.paired_history import History
from perfsuite.core.errors import ConfigError
from perfsuite.core.git import run_git
from perfsuite.storage.read import read_bytes, read_json
from perfsuite.storage.write import (
    check_output_dir,
    inside,
    make_dir,
    refuse_link,
    write_bytes,
    write_new_text,
    write_text,
)

ENV_NAME = "perfsuite-history"
VERSION = "perfsuite-paired-history-1"  # asv compares results only within one benchmark version
# asv publish writes graphs/.../<benchmark name>.json: one name past 250 bytes fails the whole
# site (ENAMETOOLONG), and a parameter value may be 1000 characters.
MAX_NAME_CHARS = 200


def benchmark_name(state: History) -> str:
    """`perfsuite_history.<workload>.<case>` in ASCII; past MAX_NAME_CHARS a readable start and a
    digest of the whole name, so one case always maps to one name and two long ones stay apart."""

    def safe(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", text)

    case = "_".join(f"{safe(str(k))}_{safe(str(v))}" for k, v in sorted(state.params.items())) or "default"
    name = f"perfsuite_history.{safe(state.workload)}.{case}"
    if len(name) <= MAX_NAME_CHARS:
        return name
    # The digest hashes the raw workload and parameters: `a-b` and `a_b` slug alike, hash apart.
    whole = json.dumps([state.workload, sorted((str(k), str(v)) for k, v in state.params.items())])
    digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[: MAX_NAME_CHARS - len(digest) - 1]}_{digest}"


def paired_series(state: History) -> list[tuple[str, float]]:
    """(sha, seconds) per measured commit: the start's time times the chained ratio."""
    rows = [r for r in state.trajectory() if r["outcome"] == "measured"]
    start_s = next((r["parent_seconds"] for r in rows if r.get("parent_seconds")), None)
    if start_s is None:
        return []
    out = [(state.base.sha, start_s)]
    out += [(r["sha"], start_s * r["chained"]) for r in rows]
    return out


def results_dir(conf: Path) -> Path:
    """The results folder `conf` (an asv.conf.json) names; ConfigError when it is not one."""
    try:
        from asv.config import Config
    except ImportError:
        raise ConfigError("--asv: asv is not installed (pip install asv, or perfsuite's dev extra)") from None

    try:
        c = Config.load(str(conf))
    except Exception as exc:  # noqa: BLE001 - asv's own errors vary: name the file
        raise ConfigError(f"--asv {conf}: not an asv configuration ({type(exc).__name__}: {exc})") from None
    # asv reads its folders relative to the configuration's own folder, wherever it is run from.
    return (conf.resolve().parent / c.results_dir).resolve()


def _machine(results: Path) -> tuple[str, dict]:
    """The machine to file the series under: the one asv has results for on this host (by name),
    the only one there, else this host described as `asv machine --yes` would."""
    from asv.machine import Machine

    found = {}
    host = platform.node()
    for f in results.glob("*/machine.json") if results.is_dir() else []:
        try:  # non-blocking: a FIFO there is refused, never waited on
            found[f.parent.name] = json.loads(read_bytes(f, ConfigError))
        except ConfigError:  # a FIFO, a folder, unreadable: this host's is refused, another's passed over
            if f.parent.name == host:
                raise
        except ValueError:  # not asv's: another machine's folder is not ours to judge
            continue
    if host in found:
        return host, found[host]
    if len(found) == 1:
        return next(iter(found.items()))
    params = {k: str(v) for k, v in Machine.get_defaults().items()}
    params["machine"] = host
    return host, {**params, "version": 1}


def _commit_date_ms(repo: Path, sha: str) -> int:
    res = run_git(repo, "log", "-1", "--format=%ct", sha)  # a commit's sha, never an option
    try:
        return int(res.stdout.strip()) * 1000
    except ValueError:
        return int(datetime.now(timezone.utc).timestamp() * 1000)


def _benchmark_list(index: Path) -> dict:
    if not index.exists():
        return {"version": 2}
    known = read_json(index, ConfigError)  # non-blocking, regular files only: a FIFO cannot hang it
    if not isinstance(known, dict):
        raise ConfigError(f"{index}: not asv's benchmark list (a JSON object)")
    return known


def _target(conf: Path) -> tuple[Path, str, dict, dict]:
    """Where the series goes, checked: (results folder, machine, its parameters, asv's benchmark
    list). A machine folder that is a link out of the results folder, or a link in place of
    machine.json or benchmarks.json, is refused: asv's files stay where its configuration says."""
    results = results_dir(conf)
    machine, machine_params = _machine(results)
    folder = inside(results, machine)
    refuse_link(folder / "machine.json")
    refuse_link(results / "benchmarks.json")
    return results, machine, machine_params, _benchmark_list(results / "benchmarks.json")


def preflight(conf: Path) -> None:
    """What export would refuse, refused before a history measures anything."""
    check_output_dir(results_dir(conf), "--asv's results folder")
    _target(conf)


def export(state: History, conf: Path, repo: Path) -> list[Path]:
    """Write the paired series into the asv results of `conf` (asv.conf.json); returns the files.
    Everything is checked, and every file staged, before the first is written."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    series = paired_series(state)
    if not series:
        raise ConfigError("the history has no measured commit yet: nothing to export to asv")
    results, machine, machine_params, known = _target(conf)
    name = benchmark_name(state)
    bench = {
        "name": name,
        "type": "track",
        "unit": "seconds",
        "param_names": [],
        "params": [],
        "version": VERSION,
        "timeout": 60,
        "code": f"# perfsuite history {state.workload} {state.params}: each commit paired with the one before",
    }
    known[name] = bench
    python = ".".join(platform.python_version_tuple()[:2])
    # The folder name is the machine: asv would file a machine.json's own `machine` (`../x`) by it.
    params = {k: v for k, v in machine_params.items() if k != "version"} | {"machine": machine}
    staged: dict[Path, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="perfsuite-asv-") as tmp:
        # asv's Results.save opens its file by name (through a planted link): it writes here,
        # and the bytes go through perfsuite's writer.
        for sha, seconds in series:
            r = Results({**params, "python": python}, {}, sha, _commit_date_ms(repo, sha), python, ENV_NAME, {})
            r.add_result(
                bench,
                BenchmarkResult(result=[seconds], samples=[None], number=[None], errcode=0, stderr="", profile=None),
            )
            r.save(tmp)
            file = f"{sha[:8]}-{ENV_NAME}.json"
            staged[inside(results, machine, file)] = (Path(tmp) / machine / file).read_bytes()
    for path in staged:
        refuse_link(path)
    folder = make_dir(results / machine, "asv's machine folder")
    if not (folder / "machine.json").exists():
        write_new_text(folder / "machine.json", json.dumps(machine_params, indent=4))
    index = results / "benchmarks.json"
    write_text(index, json.dumps(known, indent=4, sort_keys=True))  # atomic: asv's own list is never left cut
    for path, data in staged.items():
        write_bytes(path, data)
    return list(staged)
