"""Load a workload's module as it was at another git revision, beside the current one, so
the gate can interleave old and new steps in one process.

The old module is executed from `git show REV:perfsuite/workloads/NAME.py` under a private
module name, with registration captured instead of added to the registry. It imports the
*current* perfsuite core (runner, params, record): the gate compares workload code, which is
where a user's change to a model or a training step lives.
"""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError
from perfsuite.workloads.base import Workload


def resolve_commit(rev: str, repo: str | Path = ".") -> str:
    """The commit hash `rev` names; refused unless it is one. `rev` comes from the command line,
    so an option-like value (`--output=FILE`) must never reach git as an option."""
    if not rev or rev.startswith("-"):
        raise ConfigError(f"--base-ref {rev!r}: not a git revision (a revision cannot start with '-')")
    try:
        res = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                             cwd=repo, capture_output=True, text=True)
    except FileNotFoundError:
        raise ConfigError(f"--base-ref {rev}: git is not installed") from None
    commit = res.stdout.strip()
    if res.returncode != 0 or not commit:
        why = res.stderr.strip() or f"no such commit in {Path(repo).resolve()}"
        raise ConfigError(f"--base-ref {rev}: cannot read that revision ({why})")
    return commit


def workload_at(rev: str, name: str, repo: str | Path = ".") -> Workload:
    path = f"perfsuite/workloads/{name}.py"
    commit = resolve_commit(rev, repo)
    res = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, text=True)
    if res.returncode != 0:
        raise ConfigError(f"--base-ref {rev}: cannot read {path} at that revision ({res.stderr.strip()})")
    module = types.ModuleType(f"perfsuite_gate_{commit[:12]}_{name}")
    module.__file__ = f"{rev}:{path}"
    captured: list[Workload] = []
    with registry.capturing(captured):
        exec(compile(res.stdout, module.__file__, "exec"), module.__dict__)  # noqa: S102 (our own repo's code)
    matches = [w for w in captured if w.name == name]
    if not matches:
        raise ConfigError(f"--base-ref {rev}: {path} registers no workload named {name!r}")
    return matches[0]
