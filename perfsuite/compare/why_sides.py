"""The two sides of `perfsuite why` as processes: two revisions, or two values of one parameter.

Two revisions of one package cannot share an interpreter's module table, so each side runs in a
side process of its own (perfsuite.compare.sides), as the gate's do; `--vary` takes the same
road with one file and two parameter sets, so both modes profile and time alike. The side
processes answer the "profile" and "memory" requests of perfsuite.compare.side_worker.
"""

from __future__ import annotations

from pathlib import Path

from perfsuite.compare import sides
from perfsuite.compare.why import TOP, ProfiledSide, WhyResult, why
from perfsuite.core.errors import ConfigError


class ProcessSide(ProfiledSide):
    """A side process holding one build; each request runs there."""

    def __init__(self, side: sides.Side, params: dict) -> None:
        self.side, self.label, self.params = side, side.label, params

    def profile(self, steps: int) -> list[dict]:
        return self.side.request({"op": "profile", "build": 0, "steps": steps})["ops"]

    def time(self, n: int) -> float:
        return self.side.steps[0].time(n)

    def memory(self) -> dict:
        return self.side.request({"op": "memory", "build": 0})["memory"]


def why_checkouts(name: str, how: str, side_a: tuple, side_b: tuple, device: str, *, threads: int | None = None,
                  steps: int = 5, rounds: int = 4, top: int = TOP) -> WhyResult:
    """`side_a`, `side_b`: (label, workload file, the checkout its project's code must come from or
    None, resolved params). One process each, started, profiled, timed and stopped here."""
    from perfsuite.measure.timing import clock_for

    running: list[sides.Side] = []
    try:
        built = []
        for label, file, root, params in (side_a, side_b):
            # The heap as malloc keeps it: a held heap would hide the step's memory from its peak RSS.
            s = sides.Side(label, file, name, params, device, 1, "default", threads, root)
            running.append(s)
            built.append(ProcessSide(s, params))
        return why(name, device, how, built[0], built[1], clock_for(device, "host").now, steps, rounds, top)
    finally:
        for s in running:
            s.close()


def why_revision(workload, params: dict, base_ref: str, device: str, **kw) -> WhyResult:
    """The workload at `base_ref` (A, from a temporary worktree) against the working tree (B)."""
    file_now = sides.workload_file(workload.source, workload.name)
    repo = sides.git_root(file_now.parent)
    commit = sides.resolve_commit(base_ref, repo)
    resolved = workload.resolve(params)
    user = bool(workload.source)  # perfsuite's own workloads run beside the current core (docs/gate.md)
    with sides.worktree(repo, commit) as base_root:
        file_base = sides.file_in(repo, base_root, file_now)
        if not file_base.exists():
            raise ConfigError(f"--base {base_ref}: {file_base.relative_to(base_root)} does not exist at that "
                              "revision")
        return why_checkouts(workload.name, f"--base {base_ref}",
                             (f"base {base_ref}", file_base, base_root if user else None, resolved),
                             ("working tree", file_now, repo if user else None, resolved), device, **kw)


def why_commits(workload, params: dict, repo: Path, rel_file: Path, commit_a: str, commit_b: str, device: str,
                **kw) -> WhyResult:
    """Two commits of the workload's repository, each from its own temporary worktree (bisect's
    good revision against the commit it named)."""
    resolved = workload.resolve(params)
    user = bool(workload.source)
    with sides.worktree(repo, commit_a) as root_a, sides.worktree(repo, commit_b) as root_b:
        return why_checkouts(workload.name, f"{commit_a[:12]}..{commit_b[:12]}",
                             (commit_a[:12], root_a / rel_file, root_a if user else None, resolved),
                             (commit_b[:12], root_b / rel_file, root_b if user else None, resolved), device, **kw)


def why_vary(workload, params: dict, key: str, a, b, device: str, **kw) -> WhyResult:
    """Two values of one parameter of the working tree's workload."""
    file_now = sides.workload_file(workload.source, workload.name)
    pa, pb = workload.resolve({**params, key: a}), workload.resolve({**params, key: b})
    return why_checkouts(workload.name, f"--vary {key}={a},{b}", (f"{key}={a}", file_now, None, pa),
                         (f"{key}={b}", file_now, None, pb), device, **kw)
