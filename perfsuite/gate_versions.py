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

from perfsuite import registry
from perfsuite.errors import ConfigError
from perfsuite.workloads.base import Workload


def workload_at(rev: str, name: str, repo: str | Path = ".") -> Workload:
    path = f"perfsuite/workloads/{name}.py"
    res = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, text=True)
    if res.returncode != 0:
        raise ConfigError(f"--base-ref {rev}: cannot read {path} at that revision ({res.stderr.strip()})")
    module = types.ModuleType(f"perfsuite_gate_{rev.replace('~', '_').replace('^', '_')}_{name}")
    module.__file__ = f"{rev}:{path}"
    captured: list[Workload] = []
    with registry.capturing(captured):
        exec(compile(res.stdout, module.__file__, "exec"), module.__dict__)  # noqa: S102 (our own repo's code)
    matches = [w for w in captured if w.name == name]
    if not matches:
        raise ConfigError(f"--base-ref {rev}: {path} registers no workload named {name!r}")
    return matches[0]
