"""Walking a history: the range's first-parent commits, and each pair measured by the gate.

Each point is the gate itself (perfsuite.compare.gate_sides.GateArms through the one case loop,
perfsuite.run.execute.run_cases): the commit before (A) and the commit (B), each checked out in a
temporary worktree and run in side processes of its own, interleaved, judged by the gate's
sequential test. A commit's worktree and side processes are kept for the next pair, where it is
A: each point starts one side, not two (as bisect keeps good's). A commit whose workload file is
missing, or whose side fails to build or run, is skipped with that error, and the next commit is
paired with the last one that was measured.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from perfsuite.compare import revisions, sides
from perfsuite.compare.bisect_probe import first_parent_after, subject
from perfsuite.compare.bisection import Commit
from perfsuite.compare.gate_sides import GateArms
from perfsuite.compare.paired_gate import GateVerdict
from perfsuite.compare.paired_history import MEASURED, SKIPPED, History, Point, Window
from perfsuite.compare.settings import GateSettings
from perfsuite.core.case import Case
from perfsuite.core.config import RunConfig
from perfsuite.core.discover import read_pyproject
from perfsuite.core.errors import ConfigError
from perfsuite.core.git import run_git
from perfsuite.stats import sequential


def range_commits(repo: Path, start: str, end: str) -> tuple[Commit, list[Commit]]:
    """(start, the commits after it up to `end` on end's first-parent line, oldest first). Refused
    (exit 2) in a shallow clone, when start is not an ancestor of end, or not on its first-parent line."""
    if run_git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        raise ConfigError(
            f"{repo} is a shallow clone: its history is cut, so commits and their parents are missing "
            "(git fetch --unshallow, or clone with full history)"
        )
    if run_git(repo, "merge-base", "--is-ancestor", start, end).returncode != 0:
        raise ConfigError(
            f"--range {start[:12]}..{end[:12]}: {start[:12]} is not an ancestor of {end[:12]} (not an ancestry path)"
        )
    after = first_parent_after(repo, start, end)
    if after is None:
        raise ConfigError(
            f"--range: {start[:12]} is an ancestor of {end[:12]} but not on its first-parent line "
            "(it was merged in from a side branch): start from a commit of the main line"
        )
    return Commit(start, subject(repo, start)), after


def dirty(repo: Path) -> list[str]:
    """Tracked files changed in the working tree (what a history's workload file might come from
    uncommitted): `git status --porcelain`, untracked files left out. A pyproject.toml whose only
    change is its [tool.perfsuite] table is not counted (issue 50: the docs ask a user to add that
    table, which made every history need --allow-dirty); it says where the workloads are, not
    what a commit measures."""
    res = run_git(repo, "status", "--porcelain", "--untracked-files=no")
    changed = [line[3:] for line in res.stdout.splitlines() if line.strip()]
    return [f for f in changed if not (Path(f).name == "pyproject.toml" and _only_perfsuite_table(repo, f))]


def _without_perfsuite(doc: dict) -> dict:
    tool = {k: v for k, v in (doc.get("tool") or {}).items() if k != "perfsuite"}
    rest = {k: v for k, v in doc.items() if k != "tool"}
    return {**rest, "tool": tool} if tool else rest


def _only_perfsuite_table(repo: Path, name: str) -> bool:
    """Whether the working tree's `name` (a pyproject.toml) differs from HEAD's in [tool.perfsuite]
    alone; False whenever either cannot be read as TOML."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    head = run_git(repo, "show", f"HEAD:{name}")
    if head.returncode != 0:
        return False
    try:
        now = read_pyproject(repo / name)
        before = tomllib.loads(head.stdout)
    except (ConfigError, tomllib.TOMLDecodeError, RecursionError):
        return False
    return _without_perfsuite(now) == _without_perfsuite(before)


class PairProber:
    """Measures a commit against another with the gate; a context manager holding the worktrees
    and side processes of the commits it keeps (the last one measured, the next pair's A)."""

    def __init__(
        self,
        workload,
        params: dict,
        revs: revisions.Revisions,
        device: str,
        settings: GateSettings,
        *,
        floors: dict | None = None,
        progress: Callable[[str], None] | None = None,
        screen_alpha: float | None = None,
    ) -> None:
        self.workload, self.params, self.revs, self.device = workload, params, revs, device
        self.settings, self.progress = settings, progress
        fdr = settings.fdr
        # A pair's sequential test says slower at this alpha (History's screen); its verdict's
        # interval stays at `fdr`.
        self.screen_alpha = max(fdr, screen_alpha or fdr)
        self.floors = dict(floors or {})  # per case label: the gate's learned noise floors
        self._kept: dict[str, tuple[Path, sides.SidePool, contextlib.ExitStack]] = {}

    def __enter__(self) -> PairProber:
        return self

    def __exit__(self, *exc) -> None:
        self.keep_only(set())

    def _checkout(self, sha: str) -> tuple[Path, sides.SidePool]:
        if sha not in self._kept:
            stack = contextlib.ExitStack()
            root = stack.enter_context(revisions.worktree(self.revs.repo, sha))
            pool = sides.SidePool()
            stack.callback(pool.close)  # the sides end before their worktree is removed
            self._kept[sha] = (root, pool, stack)
        root, pool, _ = self._kept[sha]
        return root, pool

    def keep_only(self, shas: set[str]) -> None:
        """End the sides and remove the worktrees of every kept commit not in `shas`."""
        for sha in [s for s in self._kept if s not in shas]:
            self._kept.pop(sha)[2].close()

    def pair(
        self, a: str, b: str, budget_s: float | None = None, builds: int | None = None, looks: tuple | None = None
    ) -> GateVerdict | str:
        """`b` against `a`: the gate's verdict, or the error that kept `b` from being measured.
        `budget_s` and `builds` replace the prober's own for this pair (`builds` takes effect for
        sides not kept yet); `looks`, the fractions of the budget its test is read at (the gate's)."""
        from perfsuite.run.execute import check_cases, run_cases

        missing = self.revs.missing_at(b)
        if missing:
            return missing
        out = None
        for _attempt in range(2):
            root_a, pool_a = self._checkout(a)
            try:
                root_b, pool_b = self._checkout(b)
            except ConfigError as exc:  # issue 50: objects missing before a date cost their commits, not the walk
                return f"could not be checked out: {exc}"
            arms = GateArms.of(
                replace(
                    self.settings,
                    builds=self.settings.builds if builds is None else builds,
                    fdr=self.screen_alpha if looks is None else self.settings.fdr,  # a screen's alpha
                ),
                self.revs.side(root_a),
                self.revs.side(root_b),
                (f"commit {a[:12]}", f"commit {b[:12]}"),  # one label per commit: its sides serve both roles
                self.device,
                floors=self.floors,
                base_pool=pool_a,
                new_pool=pool_b,
                looks=looks or sequential.LOOKS,
                progress=self.progress,
            )
            out = run_cases(
                check_cases([Case(self.workload, self.params)], self.device, arms),
                RunConfig(device=self.device, max_time=self.settings.max_time if budget_s is None else budget_s),
            )
            if out.interrupted:  # the case loop keeps what finished; a walk stops at Ctrl-C
                raise out.interrupted
            # A kept side of A that ended mid-pair (killed from outside) is not b's failure: its
            # commit starts fresh sides and the pair runs again, once.
            if not (out.failures and f": commit {a[:12]}: " in f": {out.failures[0].get('error', '')}"):
                break
            self.keep_only({b} - {a})
        assert out is not None
        if out.failures:
            error = (out.failures[0].get("error") or "failed")[:4000]
            if f": commit {a[:12]}: " in f": {error}":  # the base failed twice: no point for b
                raise ConfigError(f"commit {a[:12]}, the base of {b[:12]}, could not be measured: {error}")
            return error
        if out.unsupported:
            raise ConfigError(f"{self.workload.name}: {out.unsupported[0][1]}")
        (v,) = out.records
        if v.alpha != self.settings.fdr:  # a screen: its interval is shown at the history's rate
            v.notes.append(f"screened at alpha {v.alpha:g}: its p is on that scale")
            v.alpha = self.settings.fdr
        return v

    def recheck(self, a: str, b: str, budget_s: float) -> GateVerdict | str:
        """`b` against `a` again for `budget_s`, in the gate's rounds of fresh side processes (none
        kept from the screen: its worktrees' sides are ended first), its test read once at the
        end at the history's rate: the pairs are a fixed sample, each round one unit of the
        interval (paired_gate.pooled). The error that kept it from being measured, if one did."""
        self.keep_only(set())
        try:
            return self.pair(a, b, budget_s=budget_s, looks=(1.0,))
        finally:
            self.keep_only(set())


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def walk(
    state: History,
    pair: Callable[[str, str], GateVerdict | str],
    env: dict,
    after: Callable[[History, Point | Window], None] = lambda s, p: None,
    keep: Callable[[set[str]], None] = lambda shas: None,
    bisect: Callable[[str, list[Commit], GateVerdict, bool, int], tuple[str | None, str]] | None = None,
    recheck: Callable[[str, str], GateVerdict | str] | None = None,
) -> list[Point]:
    """Measure every pending commit against its parent (History.parent_of), oldest first; pair
    again with `recheck(parent, sha)` (fresh processes, longer; default `pair`) each point its
    own test called slower (History.to_recheck); then gate the one stretch whose
    chained ratio crossed the limit with no point confirmed, if any (a slow drift), and recheck it
    too when its gate says slower. `after` runs
    after each point and window (save the log, say so); `keep` is told which commits' sides are
    still needed. A confirmed point that spans several commits (--every N), and a confirmed slow
    drift, is bisected (and a confirmed improvement's span, `direction` -1): `bisect(start, commits,
    confirmation, drift, direction)` names the first commit of them
    like the last (the recheck that confirmed it, `confirmation`, is bad's), or None, with a line
    saying how it ended. Returns the points measured now."""
    new: list[Point] = []
    state.walks += 1  # this run: its rechecks are one false-discovery family (History.confirm)
    for c in state.pending():
        parent = state.parent_of(c.sha)
        t0 = time.monotonic()
        got = pair(parent, c.sha)
        seconds = time.monotonic() - t0
        if isinstance(got, str):
            point = Point(c.sha, parent, SKIPPED, error=got, seconds=seconds, env=env, measured_at=_now())
            keep({parent})
        else:
            point = Point(c.sha, parent, MEASURED, got, seconds=seconds, env=env, measured_at=_now())
            keep({c.sha})
        state.points.append(point)
        new.append(point)
        state.confirm()
        after(state, point)
    rechecks = recheck or pair

    def rechecked(x: Point | Window) -> None:
        keep(set())  # fresh side processes for both commits: a recheck shares none with the screen
        got = rechecks(*x.ends)
        if isinstance(got, GateVerdict):  # a pair that fails now leaves it as it was
            x.recheck, x.rechecked_in = got, state.walks
            state.confirm()
            after(state, x)

    # Everything screened and not rechecked yet: this run's, or what an interrupted run (or a log
    # of before windows were rechecked) left.
    for x in state.to_recheck():
        rechecked(x)

    def bisected() -> None:
        # Every confirmed span not bisected yet (points of --every N, drifts), this run's or a
        # resumed one's.
        if bisect is None:
            return
        # A confirmed improvement's span is bisected too, in the faster direction (issue 49: it was
        # left on its span while a regression's was named).
        spans: list[Point | Window] = [*state.regressions(), *state.drifts(), *state.improvements()]
        spans = [x for x in spans if len(state.between(*x.ends)) > 1 and not x.bisection]
        if spans:
            keep(set())  # the walk's kept sides are not needed while bisect starts its own
        for x in spans:
            assert x.recheck is not None  # confirmed: by its recheck
            faster = isinstance(x, Point) and x.improved
            x.culprit, x.bisection = bisect(
                x.ends[0], state.between(*x.ends), x.recheck, isinstance(x, Window), -1 if faster else 1
            )
            after(state, x)

    bisected()
    window = state.frog_window()
    if window is not None:
        got = pair(*window)
        if isinstance(got, GateVerdict):
            w = Window(window[0], window[1], got)
            state.windows.append(w)
            state.confirm()  # a window's own gate is a screen: confirmed only by its recheck
            after(state, w)
            if w in state.to_recheck():
                rechecked(w)
                bisected()
    return new
