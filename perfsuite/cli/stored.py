"""The store's part in every measuring command: `--store` for the command's processes
(store_given), and a run row opened before measuring, finished with the command's exit (stored_run)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from rich.text import Text

# The commands whose results are kept in the store, and the kind of run each makes.
STORED = {
    "run": "run",
    "pair": "pair",
    "amp": "amp",
    "gate": "gate",
    "bisect": "bisect",
    "why": "why",
    "history": "history",
    "variants": "variants",
}
# Every kind of run the store holds (`store runs --kind`): the commands', a suite's, the front-ends'
# and an import's (perfsuite.storage.store_import).
RUN_KINDS = (*dict.fromkeys(STORED.values()), "suite", "asv", "pytest", "import")
# How a command's exit status reads in its run row.
_STATE = {0: "finished", 1: "finished", 3: "finished", 5: "finished", 130: "interrupted"}


class _Run:
    """A command's run in the store: `recorder` (None for commands that store nothing, and for
    `run --plan`, which measures nothing) and the exit status it ends with."""

    def __init__(self, recorder) -> None:
        self.recorder = recorder
        self.status: int | None = None

    def exit(self, status: int) -> int:
        self.status = status
        return status


def _config(args) -> dict:
    """The command's configuration as its run row keeps it (no store URL: it may hold a password;
    the raw command line, which may too, is not among the parsed options)."""
    out = {}
    for k, v in vars(args).items():
        if k == "store" or callable(v):
            continue
        out[k] = (
            [str(x) for x in v]
            if isinstance(v, list)
            else v
            if isinstance(v, (int, float, bool, str, type(None)))
            else str(v)
        )
    return out


def _kind(args) -> str | None:
    kind = STORED.get(args.command)
    if kind == "run":
        if getattr(args, "plan", False):
            return None
        if getattr(args, "suite", None) or getattr(args, "config", None):
            return "suite"
    if kind == "gate" and getattr(args, "learn_floor", None):
        return None
    return kind


@contextlib.contextmanager
def store_given(given: str | None):
    """`--store` is PERFSUITE_STORE for this command: its `store:` sources, and the side and worker
    processes it starts, use the same store. Restored afterwards (main() may be called again)."""
    from perfsuite.database.location import ENV, parse

    if given is None:
        yield
        return
    parse(given, "--store", Path.cwd())  # refused before it reaches the environment (a NUL cannot)
    before = os.environ.get(ENV)
    os.environ[ENV] = given
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


@contextlib.contextmanager
def stored_run(args, err):
    """The store's run of this command (see the module's docstring); notes go to `err`."""
    kind = _kind(args)
    if kind is None:
        yield _Run(None)
        return
    from perfsuite.database.location import resolve
    from perfsuite.database.recorder import Recorder

    location = resolve(getattr(args, "store", None), warn=lambda t: err.print(Text("warning: " + t, style="yellow")))
    run = _Run(Recorder(location, kind, _config(args)))
    state = "failed"
    try:
        yield run
        state = _STATE.get(run.status, "failed")
    except KeyboardInterrupt:
        state = "interrupted"
        raise
    finally:
        run.recorder.finish(state)
        for note in run.recorder.notes:
            err.print(Text("store: " + note, style="yellow"))
