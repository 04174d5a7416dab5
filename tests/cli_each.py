"""Several perfsuite command lines in one fresh interpreter, for tests that check how each of a
few bad inputs is refused (exit 2 and a message) in a user's project: each fresh interpreter
cost seconds (perfsuite and the project's torch model imported, the side processes' fork server
started), and these commands are refused before anything is measured.

Each command line goes through perfsuite.cli.app.main as `python -m perfsuite` runs it, from the
same folder and with the current folder first on sys.path; argparse's refusals (SystemExit) are
its exit code too. The commands run one after the other in that interpreter: what the first
discovers (the project's workloads) stays loaded for the next, as it would in a user's session
with `perfsuite.cli.app.main`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_DRIVER = r"""
import contextlib, io, json, sys
from perfsuite.cli import app as cli

results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse's refusals
            code = exc.code if isinstance(exc.code, int) else 2
    results.append([code, out.getvalue(), err.getvalue()])
with open(sys.argv[2], "w") as f:
    json.dump(results, f)
"""


@dataclass
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def perfsuite_each(cwd: Path, commands: list[tuple[str, ...]], env: dict, timeout: float = 300) -> list[Result]:
    """Each of `commands` (perfsuite's arguments) run through perfsuite.cli.app.main, in order, in one
    interpreter started in `cwd`: their exit codes and what each printed."""
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.json"
        res = subprocess.run(
            [sys.executable, "-c", _DRIVER, json.dumps([list(c) for c in commands]), str(results)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert res.returncode == 0 and results.exists(), res.stdout + res.stderr
        done = json.loads(results.read_text())
    assert len(done) == len(commands)
    return [Result(tuple(c), code, out, err) for c, (code, out, err) in zip(commands, done)]
