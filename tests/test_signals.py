"""Every signal leaves nothing behind (issue 51, item 2): SIGINT to the process group (a
terminal's Ctrl-C), SIGTERM and SIGHUP to the command alone (`kill`, a CI runner's cancel), at
moments from Python's start to the middle of a measurement, for run, gate, bisect, why and
history. Each cell is held to: the exit status of its signal, no traceback, no git worktree, no
temporary folder and no process of the command left, the store still opens, and what `run` said
it saved is in its file. scripts/signal_matrix.py runs every signal at every moment of every
command (reports/hostile/signals.md: 45 of 45 cells clean on 2026-11-30, bisect and why
included); these are a fixed sample of its cells, one per signal, and the cell CI once lost."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("signal_matrix", ROOT / "scripts" / "signal_matrix.py")
matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(matrix)

CELLS = [
    ("run", "SIGINT", 1.5),  # while the fork server starts: its traceback was printed beside "interrupted"
    # A signal inside torch's import was swallowed (the gate ran on to its end) or aborted the
    # process: each failed once in CI; reports/hostile/signals-repeats.md, cli/stop.py.
    ("gate", "SIGHUP", 3.0),  # torch importing: the signal held over the import, then delivered
    ("bisect", "SIGHUP", 8.0),  # a probe's side processes running
    ("history", "SIGTERM", 8.0),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return matrix.make_project(tmp_path_factory.mktemp("signals"))


@pytest.mark.slow
@pytest.mark.parametrize(("command", "sig", "after"), CELLS, ids=[f"{c}-{s}-{a}s" for c, s, a in CELLS])
def test_a_signal_leaves_nothing_behind(project, command, sig, after):
    import signal

    if sig != "SIGINT" and signal.getsignal(getattr(signal, sig)) is signal.SIG_IGN:
        # Inherited: under `nohup` perfsuite leaves SIGHUP ignored, as asked (cli/stop.py).
        pytest.skip(f"{sig} is ignored in this process tree (nohup): the command rightly keeps ignoring it")
    cell = matrix.interrupt_once(project, command, sig, after)
    assert cell["clean"], {k: v for k, v in cell.items() if k != "clean"}
    assert not cell["finished_first"], "the command ended before the signal: the cell tests nothing"
