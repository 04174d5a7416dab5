"""The argument parser, assembled from the commands: the options every command shares, then
each command module's own (`add_arguments`), in the order `perfsuite --help` lists them."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

from perfsuite.cli import (
    amp,
    asv_offline,
    bisect,
    check,
    compare,
    env,
    export,
    gate,
    history,
    listing,
    pair,
    peak,
    profile_step,
    report,
    roofline,
    run,
    store,
    suites,
    system,
    trace,
    values,
    variants,
    why,
)
from perfsuite.storage import machine_drift
from perfsuite.storage.peaks import DEFAULT_PEAK_FILE

# Each module declares NAME, add_arguments(subparsers) and command(args, console, recorder) -> exit
# status (recorder: the results store's perfsuite.database.recorder.Recorder for this run, or None).
COMMAND_MODULES: tuple[ModuleType, ...] = (
    listing,
    env,
    system,
    run,
    suites,
    store,
    peak,
    compare,
    amp,
    gate,
    bisect,
    why,
    history,
    pair,
    variants,
    roofline,
    profile_step,
    trace,
    report,
    check,
    export,
    asv_offline,
)


def _machine_log(text: str) -> Path | None:
    return None if text == "none" else Path(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfsuite", description="Benchmark deep-learning workloads.")
    p.add_argument(
        "--peak-file",
        type=Path,
        default=DEFAULT_PEAK_FILE,
        help=f"where machine peaks are stored (default {DEFAULT_PEAK_FILE})",
    )
    log = machine_drift.default_log()
    p.add_argument(
        "--machine-log",
        type=_machine_log,
        default=log,
        metavar="PATH",
        help="`run` (suites included) notes each run's machine-speed reference here and widens a "
        "run's interval by how far the last runs of the same case moved (default: "
        f"${machine_drift.ENV_VAR} when set, else ~/.cache/perfsuite/machine-speed.jsonl; "
        f"now {log if log is not None else 'none'}; none: off)",
    )
    p.add_argument(
        "--workloads",
        dest="workload_paths",
        action="append",
        type=values.given_path("--workloads"),
        default=[],
        metavar="PATH",
        help="a file or folder of your own workloads (@perfsuite.workload); repeatable. "
        "[tool.perfsuite] workloads in pyproject.toml are found without it",
    )
    p.add_argument(
        "--store",
        default=None,
        metavar="PATH|URL",
        help="the results store every measuring command writes to and `store:` sources read: a "
        "SQLite file or postgresql://user@host/db (default: $PERFSUITE_STORE, else [tool.perfsuite] "
        "store, else .perfsuite/results.db in the project)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_arguments(sub)
    return p
