"""Bisect's contact with git and the gate: the first-parent commits between two revisions, and a
prober that measures one commit against the good revision.

Each probe is the gate itself: the gate's two arms (perfsuite.compare.gate_sides.GateArms) through the
one case loop (perfsuite.run.execute.run_cases), with the good revision as the base arm and the
candidate as the new one, each checked out in a temporary git worktree and run in side processes
of their own, interleaved, judged by the gate's sequential test; one case, so its own test (and
Benjamini-Hochberg over one p value) decides. The good
revision's worktree and side processes are made once and kept for the whole bisection; a
candidate's live for its probe. A candidate whose workload file is missing, or whose side fails to build or run, is
skipped with that error, as `git bisect skip` would be.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from pathlib import Path

from perfsuite.compare import paired_gate, revisions, sides
from perfsuite.compare.bisection import CHANGED, SAME, SKIPPED, Commit, Probe, classify, halfway
from perfsuite.compare.gate_sides import GateArms, side_clock, sides_settle
from perfsuite.compare.paired_gate import across_cases
from perfsuite.compare.settings import GateSettings
from perfsuite.core.case import Case
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError
from perfsuite.core.git import run_git
from perfsuite.stats import verdict

# A probe after the confirmation measures in the gate's rounds until its pairs fall on one side of
# halfway, for at most MAX_BUDGETS budgets, read once FIRST_READ looks of LOOK_SHARE of a budget
# have been measured (one budget's rounds). Pairs come in runs of one process pairing and one
# stretch of the machine's speed: on 2026-11-26 a
# commit carrying the whole 5% slowdown showed a median of 0.922 over its first 18 pairs (half a
# budget) and was put with good, and the bisection named a later commit (reports/bisect/).
LOOK_SHARE, MAX_BUDGETS, FIRST_READ = 0.5, 4, 2
# The confirmation is the gate's sequential test over MAX_BUDGETS budgets, read at half a budget and
# then at every budget: a 5% slowdown gets the pairs to show it on a noisy machine (in 15 s it was
# shown as often as not on this VM, 2026-11-26), an unchanged one stops at the first look whose
# pairs sit clearly below the threshold. The early looks' boundaries are strict (O'Brien-Fleming:
# 3e-13 at half a budget, 3e-7 at one), so a large slowdown stops after one budget, not half.
CONFIRM_LOOKS = (0.5 / MAX_BUDGETS, 1 / MAX_BUDGETS, 2 / MAX_BUDGETS, 3 / MAX_BUDGETS, 1.0)


def subject(repo: Path, sha: str) -> str:
    return run_git(repo, "log", "-1", "--format=%s", sha).stdout.strip()


def first_parent_commits(repo: Path, good: str, bad: str) -> list[Commit]:
    """The commits after `good` up to `bad` on bad's first-parent line, oldest first. Errors (exit 2)
    when good is bad, not an ancestor of bad, or not on its first-parent line."""
    if good == bad:
        raise ConfigError(f"--good and --bad are the same commit ({good[:12]}): nothing to bisect")
    if run_git(repo, "merge-base", "--is-ancestor", good, bad).returncode != 0:
        raise ConfigError(
            f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}: bisect looks for the "
            "commit that made bad slower (or faster, with --faster) than an earlier good"
        )
    after = first_parent_after(repo, good, bad)
    if after is None:
        raise ConfigError(
            f"--good {good[:12]} is an ancestor of --bad {bad[:12]} but not on its first-parent line "
            "(it was merged in from a side branch): give the merge's first parent instead"
        )
    return after


def first_parent_after(repo: Path, start: str, end: str) -> list[Commit] | None:
    """The commits after `start` up to `end` on end's first-parent line, oldest first; None when
    `start` is not on that line (bisect's range and a history's alike)."""
    res = run_git(repo, "log", "--first-parent", "--format=%H%x00%s", end)
    if res.returncode != 0:
        raise ConfigError(f"cannot read the history of {end[:12]}: {res.stderr.strip()}")
    out: list[Commit] = []
    for line in res.stdout.splitlines():
        sha, _, subj = line.partition("\0")
        if sha == start:
            return out[::-1]
        out.append(Commit(sha, subj))
    return None


@dataclass(frozen=True)
class HalfwayArms(GateArms):
    """A commit against good, classified like good or like bad (perfsuite.compare.bisection.classify, in
    the arms' direction: 1 bisects a slowdown, -1 a speed-up):
    the gate's two arms, their pairs gathered in looks of LOOK_SHARE of the budget until they fall
    on one side of `mid` (half of bad's confirmed log ratio), read from the FIRST_READ-th look (a
    whole budget) on, for at most MAX_BUDGETS budgets; then by the side their median lies on, with
    a note."""

    mid: float = 0.0

    def measure(self, case, cfg, ctx):
        import math

        looks: list[dict] = []
        runs: list[paired_gate.PairedRun] = []  # one per round of side processes
        decision = None
        t0 = self.clock.now()
        clock = self.clock
        # Rounds as the gate's (a budget's rounds_for, each in fresh side processes; the first may
        # take good's pool): each process draws its own memory layout and each round its own moment
        # of the machine's load, so each round is one unit of the interval (paired_gate.pooled), read from
        # a budget's FIRST_READ * LOOK_SHARE on (issue 49: a bisection under load named a commit
        # seven before the real one when one set of processes decided).
        per_budget = paired_gate.rounds_for(cfg.max_time, self.rounds)
        first = max(2, math.ceil(FIRST_READ * LOOK_SHARE * per_budget))
        while decision is None and self.clock.now() - t0 < MAX_BUDGETS * cfg.max_time:
            with self.side_processes(case, cfg, pools=not runs) as (base, now):
                if not runs:  # one clock for every round: the first processes decide
                    clock = side_clock(self.clock, base + now, cfg.device, self.threads)
                run = paired_gate.paired_ratios(
                    [s.steps[0] for s in base],
                    [s.steps[0] for s in now],
                    clock,
                    cfg.max_time / per_budget,
                    on_look=self.look_said(case, sum(len(r.ratios) for r in runs), len(runs) + 1),
                )
                # The faults that matter happen in the sides' timed blocks, per pair of this round.
                per_pair = sum(s.faults for s in base + now) / max(len(run.ratios), 1)
                runs.append(replace(run, faults_per_pair=per_pair, settle=sides_settle(base + now)))
            every = paired_gate.pooled(runs)
            if len(runs) >= first:
                decision = classify(every.ratios, self.mid, direction=self.direction, units=every.units)
            looks.append({"pairs": len(every.ratios), "seconds": self.clock.now() - t0, "decision": decision})
        every = paired_gate.pooled(runs)
        ratios = every.ratios
        notes = [f"classified against halfway to bad's change: ratio {math.exp(self.mid):.3f}"]
        if decision is None:
            estimate = verdict.ratio_estimate(ratios, every.units)
            beyond = self.direction * math.log(estimate) > self.direction * self.mid
            decision = CHANGED if beyond else SAME
            notes.append(
                f"undecided after {len(ratios)} pairs ({MAX_BUDGETS} budgets): put with "
                f"{'bad' if decision == CHANGED else 'good'} by its ratio {estimate:.3f}"
            )
        run = replace(every, looks=tuple(looks), decision=decision, p=1.0)
        return paired_gate.GateVerdict(
            case.label, abs(math.expm1(self.mid)), run, decision == CHANGED, notes, self.fdr, self.direction
        )


class Prober:
    """Measures a commit against `good` with the gate; a context manager holding good's worktree.
    `revs` (revisions.Revisions) says which workload file each revision is measured with; `direction`
    1 bisects a slowdown, -1 a speed-up."""

    def __init__(
        self,
        workload,
        params: dict,
        revs: revisions.Revisions,
        good: str,
        device: str,
        settings: GateSettings,
        *,
        direction: int = 1,
        progress=None,
    ) -> None:
        self.workload, self.params, self.revs, self.good = workload, params, revs, good
        self.device, self.settings, self.direction = device, settings, direction
        self.progress = progress
        self._stack = contextlib.ExitStack()
        self.good_root: Path | None = None

    def __enter__(self) -> Prober:
        self.good_root = self._stack.enter_context(revisions.worktree(self.revs.repo, self.good))
        # Every probe measures a candidate against good: good's side processes start once and
        # serve every probe (closed before its worktree is removed).
        self.good_sides = sides.SidePool()
        self._stack.callback(self.good_sides.close)
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def __call__(self, commit: Commit, confirmation: Probe | None = None) -> Probe:
        """`commit` against good: by the gate's rule when it confirms bad (`confirmation` None),
        else like good or like bad (HalfwayArms, halfway to the confirmation's median ratio)."""
        from perfsuite.run.execute import check_cases, run_cases

        t0 = time.monotonic()
        missing = self.revs.missing_at(commit.sha)
        if missing:
            return Probe(commit.sha, SKIPPED, error=missing)
        s = self.settings
        fdr = s.fdr
        assert self.good_root is not None  # made on entering the prober
        with contextlib.ExitStack() as held:
            try:
                root = held.enter_context(revisions.worktree(self.revs.repo, commit.sha))
            except ConfigError as exc:  # objects missing: skipped, as git bisect skip would
                return Probe(commit.sha, SKIPPED, error=f"could not be checked out: {exc}"[:4000])
            arms = GateArms.of(
                s,
                self.revs.side(self.good_root),
                self.revs.side(root),
                (f"good {self.good[:12]}", f"commit {commit.sha[:12]}"),
                self.device,
                base_pool=self.good_sides,
                direction=self.direction,
                progress=self.progress,
            )
            budget = s.max_time
            if confirmation is not None:
                arms = HalfwayArms(
                    **{f: getattr(arms, f) for f in arms.__dataclass_fields__},
                    mid=halfway(confirmation.median_ratio, s.threshold, self.direction),
                )
            else:
                arms, budget = replace(arms, looks=CONFIRM_LOOKS), MAX_BUDGETS * s.max_time
            for _attempt in range(2):
                out = run_cases(
                    check_cases([Case(self.workload, self.params)], self.device, arms),
                    RunConfig(device=self.device, max_time=budget),
                )
                # A good side that ended mid-probe (killed from outside, by the OOM killer or a
                # stray signal: a kept side lives for the whole bisection) is not the candidate's
                # failure: the pool starts a fresh one and the probe runs again, once.
                if not (out.failures and f": good {self.good[:12]}: " in f": {out.failures[0].get('error', '')}"):
                    break
        if out.interrupted:  # the case loop keeps what finished; a bisection stops at Ctrl-C
            raise out.interrupted
        seconds = time.monotonic() - t0
        if out.failures:  # a side that did not build or run: skipped, with its error
            f = out.failures[0]
            return Probe(commit.sha, SKIPPED, error=(f.get("error") or "failed")[:4000], seconds=seconds)
        if out.unsupported:
            raise ConfigError(f"{self.workload.name}: {out.unsupported[0][1]}")
        (v,) = across_cases(out.records, fdr) if confirmation is None else out.records
        return Probe(commit.sha, CHANGED if v.confirmed else SAME, v, seconds=seconds)
