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

import json
import platform
import re
from datetime import datetime, timezone
from pathlib import Path

from perfsuite.compare.paired_history import History
from perfsuite.core.errors import ConfigError
from perfsuite.core.git import run_git
from perfsuite.storage.write import write_text

ENV_NAME = "perfsuite-history"
VERSION = "perfsuite-paired-history-1"  # asv compares results only within one benchmark version


def benchmark_name(state: History) -> str:
    def safe(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", text)

    case = "_".join(f"{safe(str(k))}_{safe(str(v))}" for k, v in sorted(state.params.items())) or "default"
    return f"perfsuite_history.{safe(state.workload)}.{case}"


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
    for f in results.glob("*/machine.json") if results.is_dir() else []:
        try:
            found[f.parent.name] = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
    host = platform.node()
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


def export(state: History, conf: Path, repo: Path) -> list[Path]:
    """Write the paired series into the asv results of `conf` (asv.conf.json); returns the files."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    series = paired_series(state)
    if not series:
        raise ConfigError("the history has no measured commit yet: nothing to export to asv")
    results = results_dir(conf)
    machine, machine_params = _machine(results)
    (results / machine).mkdir(parents=True, exist_ok=True)
    machine_file = results / machine / "machine.json"
    if not machine_file.exists():
        machine_file.write_text(json.dumps(machine_params, indent=4))
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
    index = results / "benchmarks.json"
    try:
        known = json.loads(index.read_text()) if index.exists() else {"version": 2}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{index}: not asv's benchmark list ({type(exc).__name__}: {exc})") from None
    if not isinstance(known, dict):
        raise ConfigError(f"{index}: not asv's benchmark list (a JSON object)")
    known[name] = bench
    write_text(index, json.dumps(known, indent=4, sort_keys=True))  # atomic: asv's own list is never left cut
    python = ".".join(platform.python_version_tuple()[:2])
    params = {k: v for k, v in machine_params.items() if k != "version"}
    written = []
    for sha, seconds in series:
        r = Results({**params, "python": python}, {}, sha, _commit_date_ms(repo, sha), python, ENV_NAME, {})
        r.add_result(
            bench, BenchmarkResult(result=[seconds], samples=[None], number=[None], errcode=0, stderr="", profile=None)
        )
        r.save(str(results))
        written.append(results / machine / f"{sha[:8]}-{ENV_NAME}.json")
    return written
