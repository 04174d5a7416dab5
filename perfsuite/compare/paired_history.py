"""A paired history: each first-parent commit of a range measured against its predecessor, as a log.

asv stores one separate run per commit and compares runs; on a shared machine two runs of the
same code differ by more than the change sought (ResNet18 ci b8: 7.8-10% SD between runs on this
VM, reports/quality/), and a machine that slowed between two commits reads as a code change.
Here every point is the gate's paired ratio of a commit against the commit before it (both
sides measured interleaved in the same minutes, perfsuite.compare.history_walk), so the machine's
drift between points cancels, and the trajectory is the chained product of the ratios.

The state is the log itself (like a bisection's, perfsuite.compare.bisection): the range's start
(`base`), its commits oldest first, and one point per commit measured so far; what to measure
next, which changes are confirmed and the trajectory are derived from it, so a walk that was
interrupted resumes from its log and `--update` extends it with the commits that came since.

Confirmed, in two stages:
1. a screen: the point's own sequential test said slower beyond the threshold (the larger of the
   history's threshold and the case's learned noise floor), at alpha = SCREEN_ALPHA (a slow-drift
   window's gate between its ends is a screen too, and goes through the same stage 2);
2. a recheck: every screened point is paired again in the gate's rounds of fresh side processes,
   for RECHECK_BUDGET times the budget in all (as bisect confirms --bad), and confirmed when that recheck's test says slower, survives Benjamini-Hochberg at --fdr across
   the rechecks of the same run (false discoveries controlled across commits, as the gate does
   across cases), and its interval lies wholly beyond the threshold (or the case's floor).
Why a recheck, not Benjamini-Hochberg over the screens: the sequential test stops as soon as its
boundary is crossed, so a real +3% step often ends with p just under alpha, which a correction
across 20 commits cannot keep; and a point's pairs share their few side processes, whose own
placement (a few percent here) the pairs' p does not see: in one history on this VM an
unchanged commit read 1.038 at p 7e-5, and another 1.054, which read 0.993 when paired again in
fresh processes (reports/history/rule1-partial/). The
recheck's pairs and processes are new, so its p is valid whatever screened the point.
Improvements, the same way: a point whose first pairs' test of "faster by the threshold" says so at
SCREEN_ALPHA is rechecked, and confirmed by its recheck's test and an interval wholly below
1 / (1 + threshold). A point whose
run had another environment fingerprint than the point before (torch, CUDA, driver, CPU/GPU,
threads) is labelled: its ratio is still paired (both sides ran in that environment), but the
absolute times across the two runs are not comparable.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from perfsuite.compare.bisection import Commit
from perfsuite.compare.paired_gate import ALPHA, GateVerdict
from perfsuite.core import documents
from perfsuite.core.documents import Count, Name, NonNegative, Params, Text
from perfsuite.core.errors import ConfigError
from perfsuite.measuring.fingerprint import mismatches
from perfsuite.stats import sequential
from perfsuite.stats import summary as stats
from perfsuite.stats import verdict as words

MEASURED, SKIPPED = "measured", "skipped"
# What a history's points are judged by, stored in its settings: a log of another rule is refused.
# 4: as 3, with a speed-up screened by its own test at SCREEN_ALPHA (under 3, by its 98% interval
# wholly below 1 / (1 + threshold): a log of 3 would have its unrechecked points rechecked anew);
# 3: screened, then confirmed by a recheck (rounds of fresh processes) whose interval lies beyond
# the threshold (each pairing of builds given both orders: perfsuite.compare.paired_gate._b_first);
# 2: by the recheck's test alone; 1: Benjamini-Hochberg over the points.
HISTORY_RULE = 4
# The screen's false-alarm rate: a point is rechecked when its own sequential test says slower at
# this alpha (or --fdr, if larger). The screen finds, the recheck confirms: at alpha 0.01 two of
# ten +3% steps on the development VM ended at p 0.018 and 0.08 and were never rechecked
# (reports/history/); an unchanged commit screened slower costs one recheck and is not confirmed.
SCREEN_ALPHA = 0.1
# A point its own test called slower is paired again for this many budgets, in the gate's rounds
# of fresh side processes (the history's --builds a side a round). A side process's placement moves
# all its pairs alike (about 2% SD between pairings on the development VM), and under load a
# round's processes share the load's moment, so the interval narrows only with more rounds: 4
# pairings left a +3% step at 1.028 (1.006-1.050), short of the threshold; twelve rounds bring its
# half-width near 1.3%. Rounds, not more processes at once: a side process holds its own model (on
# a GPU, in the one device's memory).
RECHECK_BUDGET = 4


# A window whose chained ratio since the last confirmed change reaches this many thresholds (and
# at least FROG_MIN) is gated directly, end against start: many small steps, none confirmed alone.
FROG_MIN = 0.03


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{value!r}: expected {', '.join(allowed)}")
    return value


@documents.shape("history point")
class Point(documents.Result):
    """One commit measured against `parent` (its predecessor, or the nearest earlier commit that
    could be measured): the gate's verdict of parent (A) against this commit (B), or skipped with
    the error. `env`: the comparable part of the fingerprint of the run that measured it."""

    sha: Name
    parent: Name
    outcome: Annotated[str, AfterValidator(lambda o: _one_of(o, (MEASURED, SKIPPED)))]
    verdict: GateVerdict | None = None
    error: Text = ""
    seconds: NonNegative = 0.0
    env: dict = field(default_factory=dict)
    measured_at: Text = ""
    why: dict | None = None  # the differential profile of a confirmed change (perfsuite.compare.why)
    # Stage 2: the pair measured again in fresh processes, longer, when its own test said slower
    # (module docstring); its verdict's `confirmed` is the point's.
    recheck: GateVerdict | None = None
    rechecked_in: Count = 0  # the walk (History.walks) whose false-discovery family holds the recheck
    improved: bool = False  # confirmed faster: screened faster, then so by its recheck (History.confirm)
    # With --every N a point spans several commits: the one a bisection inside it named (None:
    # not bisected, or the point is one commit), and how that bisection ended.
    culprit: Name | None = None
    bisection: Text = ""

    @model_validator(mode="after")
    def _measured_has_its_pairs(self) -> Point:
        """A point measured rests on its pairs: a log edited by hand to drop them (an empty ratios
        list was accepted, rewritten, then crashed the page, issue 51) is refused."""
        for name, v in (("verdict", self.verdict), ("recheck", self.recheck)):
            if v is not None and not v.run.ratios:
                raise ValueError(f"point {self.sha[:12]}: {name}.run.ratios is empty (a verdict rests on its pairs)")
        if self.outcome == MEASURED and self.verdict is None:
            raise ValueError(f"point {self.sha[:12]}: outcome {MEASURED!r} without its verdict (the pairs)")
        return self

    @property
    def blamed(self) -> str:
        """The commit a confirmed change is put on: the bisection's answer, else this commit."""
        return self.culprit or self.sha

    @property
    def ratio(self) -> float | None:
        return self.verdict.median_ratio if self.verdict and self.verdict.run.ratios else None

    @property
    def ends(self) -> tuple[str, str]:
        """(A, B) of the pair: what a recheck pairs again."""
        return self.parent, self.sha

    @property
    def evidence(self) -> GateVerdict | None:
        """The verdict a point is judged by: its recheck when it has one, else its first pairs."""
        return self.recheck or self.verdict

    def screen_said(self) -> str:
        """The first pairs' verdict in words, as the console and the page say it (`screen_said`)."""
        assert self.verdict is not None
        return screen_said(self.verdict, faster_too=True)


def screen_said(verdict: GateVerdict, faster_too: bool = False) -> str:
    """A screen's verdict in words, as the console and the page say it, for a point's first pairs
    and a window's gate of its ends alike. A screen whose own test called it slower is not
    confirmed until its recheck, so its word alone would read "undecided" beside an interval far
    past the threshold (a 6x step printed "undecided, ratio 6.061 (98% CI 5.184-7.087)" on
    2026-11-30): it reads "screened slower at alpha 0.1" instead; a point's speed-up that its test
    at that alpha calls faster (`faster_too`), "screened faster at alpha 0.1"."""
    screened = verdict.run.decision == sequential.SLOWER and not verdict.confirmed
    # at the screen's own rate: the interval beside it is at the history's, and may reach the
    # threshold where the screen's test did not
    word = f"screened slower at alpha {SCREEN_ALPHA:g}" if screened and verdict.direction > 0 else None
    # a point's faster screen, read the same way (a window gates slow drifts only: `faster_too` off)
    faster = faster_too and verdict.word != words.FASTER and verdict.run.p_slower(verdict.threshold, -1) < SCREEN_ALPHA
    if word is None and faster and verdict.direction > 0:
        word = f"screened faster at alpha {SCREEN_ALPHA:g}"
    return verdict.describe(word=word)


def _screened_faster(x: Point | Window) -> bool:
    """A point whose first pairs say faster by the threshold at the screen's alpha, as a slower
    screen is read: an improvement to recheck (a window gates only slow drifts). The screen for
    faster asked for the 98% interval wholly below 1 / (1 + threshold), a far stricter test than the
    slower side's alpha 0.1, so real speed-ups went unrechecked (issue 49: nanoGPT's flash attention
    read 0.948 (98% CI 0.905-0.993) in a history on 2026-11-30, and in both of the issue's)."""
    if not isinstance(x, Point) or x.verdict is None:
        return False
    v = x.verdict
    return v.word == words.FASTER or v.run.p_slower(v.threshold, -1) < SCREEN_ALPHA


@documents.shape("history window")
class Window(documents.Result):
    """A direct gate between the ends of a stretch of commits whose chained ratio crossed the
    threshold while no single step was confirmed ("boiling frog")."""

    start: Name
    end: Name
    verdict: GateVerdict
    # Confirmed as a point is (History.confirm): the window's gate is its screen; when that says
    # slower the ends are paired again in fresh processes, and this recheck must survive
    # Benjamini-Hochberg with the points' rechecks.
    recheck: GateVerdict | None = None
    rechecked_in: Count = 0  # as Point's
    why: dict | None = None  # a confirmed drift's differential profile, end against start
    # A confirmed drift is bisected as a span is (--every N): the first commit like its end (the
    # step, when one commit made it; where the drift passed halfway, when many did), and how that
    # bisection ended. A +3% step that its own pair left unscreened shows as a drift around it.
    culprit: Name | None = None
    bisection: Text = ""

    @property
    def ends(self) -> tuple[str, str]:
        return self.start, self.end

    @property
    def evidence(self) -> GateVerdict:
        return self.recheck or self.verdict

    def screen_said(self) -> str:
        """Its gate of the ends in words, as the console and the page say it (`screen_said`)."""
        return screen_said(self.verdict)


@documents.shape("history", error=ConfigError)
class History(documents.Result):
    workload: Name
    params: Params
    device: Name
    base: Commit  # the range's start: measured only as the first point's parent
    # First-parent after base, oldest first.
    commits: Annotated[list[Commit], Field(max_length=documents.MAX_GROUPS)]
    settings: dict = field(default_factory=dict)  # budget, builds, threshold, fdr, threads, heap, rule
    points: Annotated[list[Point], Field(max_length=documents.MAX_GROUPS)] = field(default_factory=list)
    windows: Annotated[list[Window], Field(max_length=documents.MAX_GROUPS)] = field(default_factory=list)
    walks: Count = 0  # the runs that have walked this log (each run's rechecks are one family)
    reported: Count = 0  # the last walk whose outcome was given (its exit status): what came since is news

    @model_validator(mode="after")
    def _points_follow_the_commits(self) -> History:
        """The points as a walk leaves them: each a commit of the range, once, in the range's
        order, paired with the base or an earlier commit. A log edited by hand against that
        (duplicates, a commit of another repository, a parent after its point, points reversed)
        was accepted and rewritten, and chained the trajectory wrong (issue 51)."""
        order = {c.sha: i for i, c in enumerate(self.commits)}
        seen = -1
        for k, p in enumerate(self.points):
            where = f"points[{k}] ({p.sha[:12]})"
            if p.sha not in order:
                raise ValueError(f"{where}: not a commit of the history's range")
            if order[p.sha] <= seen:
                raise ValueError(f"{where}: measured twice, or out of the range's order")
            seen = order[p.sha]
            if p.parent != self.base.sha and order.get(p.parent, len(order)) >= order[p.sha]:
                raise ValueError(
                    f"{where}: its parent {p.parent[:12]} is neither the range's start nor an earlier commit"
                )
        return self

    # ---- the walk -----------------------------------------------------------------------------
    def point(self, sha: str) -> Point | None:
        return next((p for p in reversed(self.points) if p.sha == sha), None)

    @property
    def every(self) -> int:
        return int(self.settings.get("every") or 1)

    def pending(self) -> list[Commit]:
        """The commits to measure and not measured yet, oldest first: every `every`-th commit
        (counted from the range's start) and the newest one."""
        done = {p.sha for p in self.points}
        n, last = self.every, len(self.commits) - 1
        return [c for i, c in enumerate(self.commits) if (i % n == n - 1 or i == last) and c.sha not in done]

    def between(self, parent: str, sha: str) -> list[Commit]:
        """The commits after `parent` up to `sha`, oldest first (what a point spans)."""
        shas = [c.sha for c in self.commits]
        lo = shas.index(parent) + 1 if parent in shas else 0
        return self.commits[lo : shas.index(sha) + 1]

    def parent_of(self, sha: str) -> str:
        """What `sha` is paired with: the nearest earlier commit that was measured (not skipped),
        else the base."""
        i = next(i for i, c in enumerate(self.commits) if c.sha == sha)
        for c in reversed(self.commits[:i]):
            p = self.point(c.sha)
            if p is not None and p.outcome == MEASURED:
                return c.sha
        return self.base.sha

    def extended(self, commits: list[Commit]) -> History:
        """This log over a longer range (`--update`: the commits that came since); refused when the
        stored commits are not where the new range has them."""
        old = [c.sha for c in self.commits]
        if [c.sha for c in commits[: len(old)]] != old:
            raise ConfigError(
                "the stored history's commits are not the start of the range now (history rewritten, "
                "or another range): give another --log, or remove it to start again"
            )
        self.commits = list(commits)
        return self

    def same_question(self, other: History) -> bool:
        """Whether `other` (a stored log) measures the same thing under the same settings."""
        return (self.workload, self.params, self.device, self.base.sha, self.settings) == (
            other.workload,
            other.params,
            other.device,
            other.base.sha,
            other.settings,
        )

    # ---- what the points say ------------------------------------------------------------------
    @property
    def fdr(self) -> float:
        return float(self.settings.get("fdr") or ALPHA)

    @property
    def threshold(self) -> float:
        return float(self.settings.get("threshold") or 0.0)

    def measured(self) -> list[Point]:
        return [p for p in self.points if p.outcome == MEASURED and p.verdict is not None]

    def confirm(self) -> list[Point]:
        """Benjamini-Hochberg at the history's false-discovery rate over the rechecks' tests, the
        points' and the slow-drift windows' together, one family per run (`rechecked_in`): what a
        run confirmed stays confirmed when a later run (tomorrow's --update) adds rechecks of its
        own, and each run's alarms are controlled among themselves. One is confirmed when its
        recheck is kept and says slower; its first verdict's `confirmed` (which its word reads)
        is set from that: a screen alone never confirms. Improvements likewise, in families of
        their own: a point screened faster is confirmed faster by its recheck's test of "faster
        by the threshold" and its interval wholly below 1 / (1 + threshold). The confirmed slower
        points."""
        judged: list[Point | Window] = [*self.measured(), *self.windows]
        # One family per run and kind (slower points, faster points, windows): a window gated
        # after the points were decided (and bisected) never changes their correction.
        families: dict[tuple[int, str], list[Point | Window]] = {}
        for x in judged:
            x.verdict.confirmed = False  # type: ignore[union-attr]
            if isinstance(x, Point):
                x.improved = False
            if x.recheck is not None:
                kind = "window" if isinstance(x, Window) else "faster" if _screened_faster(x) else "slower"
                families.setdefault((x.rechecked_in, kind), []).append(x)
        for (_run, kind), family in families.items():
            faster = kind == "faster"
            ps = [x.recheck.run.p_slower(x.recheck.threshold, -1) if faster else x.recheck.p for x in family]  # type: ignore[union-attr]
            for x, r in zip(family, stats.benjamini_hochberg(ps, self.fdr)):
                v = x.recheck
                assert v is not None
                if faster:
                    x.improved = bool(r and v.interval[1] < 1 / (1 + v.threshold))  # type: ignore[union-attr]
                    continue
                # Its test says slower, and its interval (which the pairings' spread widens, as
                # the test's p does not) lies wholly beyond the threshold: the case's learned
                # floor where that is larger. The word a confirmed change is shown with is "slower".
                v.confirmed = bool(r and v.run.decision == sequential.SLOWER and v.interval[0] > 1 + v.threshold)
                x.verdict.confirmed = v.confirmed  # type: ignore[union-attr]
        return self.regressions()

    def confirmed_now(self) -> list[Point | Window]:
        """The regressions and drifts confirmed since the last outcome given (`reported`): this
        run's, and a run's that ended before it could say so (killed while profiling)."""
        confirmed: list[Point | Window] = [*self.regressions(), *self.drifts()]
        return [x for x in confirmed if x.rechecked_in > self.reported]

    def report(self, fresh: set[str]) -> bool:
        """The outcome CI reads, given now (so a later run's is about what comes after): true on a
        regression or drift confirmed since the last outcome given (this run's, or a killed
        run's), and, when this run measured nothing new (`fresh`: the commits it measured), on a
        newest commit that carries a regression."""
        measured = self.measured()
        newest = set() if fresh else ({measured[-1].sha} if measured else set())
        news = self.confirmed_now()
        self.reported = self.walks  # said now
        return bool(
            news or any(p.sha in newest for p in self.regressions()) or any(w.end in newest for w in self.drifts())
        )

    def to_recheck(self) -> list[Point | Window]:
        """What was screened and not rechecked yet, points first: slower by its own first test,
        or (a point) faster by its interval."""
        judged: list[Point | Window] = [*self.measured(), *self.windows]
        return [
            x
            for x in judged
            if x.recheck is None and (x.verdict.run.decision == sequential.SLOWER or _screened_faster(x))  # type: ignore[union-attr]
        ]

    def drifts(self) -> list[Window]:
        """The slow-drift windows confirmed (screened, then rechecked)."""
        return [w for w in self.windows if w.verdict.confirmed]

    def regressions(self) -> list[Point]:
        return [p for p in self.measured() if p.verdict.confirmed]  # type: ignore[union-attr]

    def improvements(self) -> list[Point]:
        """Points confirmed faster (History.confirm)."""
        return [p for p in self.measured() if p.improved]

    def trajectory(self) -> list[dict[str, Any]]:
        """Per commit, in order: the chained ratio to the base and its band (the points' log
        half-widths added in quadrature: each pair of neighbours was measured apart), its absolute
        median step time from the same pairs, and whether the environment changed from the point
        before. Skipped commits carry the chain on.

        A step enters the chain by its ratio only when its interval lies wholly on one side of 1;
        a step whose interval holds 1 enters as 1 (`counted`) and widens the band alone. Chained
        point estimates of undecided steps random-walk: on a loaded machine five undecided steps
        of intervals as wide as 0.27-3.2 chained a +33% history to 0.81, and on unchanged code
        climbed to 1.115 (issue 50's rerun). The drift check (frog_window) reads the raw ratios."""
        out: list[dict[str, Any]] = []
        log_chain, var, env_before = 0.0, 0.0, None
        for c in self.commits:
            p = self.point(c.sha)
            if p is None:
                continue
            row: dict[str, Any] = {"sha": c.sha, "subject": c.subject, "outcome": p.outcome}
            if p.outcome == MEASURED and p.verdict is not None and p.ratio:
                lo, hi = p.verdict.interval
                counted = p.ratio if lo > 1 or hi < 1 else 1.0
                log_chain += math.log(counted)
                # An unbounded interval (too few pairs) leaves the chain unbounded from there on.
                var += ((math.log(hi) - math.log(lo)) / 2) ** 2 if lo > 0 and math.isfinite(hi) else math.inf
                row.update(
                    ratio=p.ratio,
                    counted=counted,
                    interval=(lo, hi),
                    word=p.verdict.word,
                    confirmed=p.verdict.confirmed,
                    improved=p.improved,
                    seconds=p.verdict.run.median_b_s,
                    parent_seconds=p.verdict.run.median_a_s,
                    env_changed=env_before is not None and bool(p.env) and p.env != env_before,
                )
                env_before = p.env or env_before
            else:
                row["error"] = p.error
            sd = math.sqrt(var)
            row.update(chained=math.exp(log_chain), band=(math.exp(log_chain - sd), math.exp(log_chain + sd)))
            out.append(row)
        return out

    def frog_window(self) -> tuple[str, str] | None:
        """(start, end) of the first stretch not gated yet whose chained ratio rose by
        max(FROG_MIN, 3 x threshold) with no single point confirmed: from the fastest commit
        since the base, a confirmed change or a gated stretch's end (so a drift after a speed-up
        is caught, and a history that keeps drifting is gated again further on), to the commit
        where the rise reached the limit; never a step that reaches it alone."""
        limit = math.log1p(max(FROG_MIN, 3 * self.threshold))
        log_chain, low, low_at = 0.0, 0.0, self.base.sha
        for c in self.commits:
            p = self.point(c.sha)
            if p is None or p.outcome != MEASURED or p.verdict is None or not p.ratio:
                continue
            # A confirmed change, or a step that alone reaches the limit (its own pair judged it:
            # screened, and rechecked when it said slower), is not part of a drift: start after it.
            if p.verdict.confirmed or math.log(p.ratio) >= limit:
                log_chain, low, low_at = 0.0, 0.0, c.sha
                continue
            log_chain += math.log(p.ratio)
            # The latest of equal lows (to a part in 1e9: estimates carry rounding): the shortest stretch.
            if log_chain <= low + 1e-9:
                low, low_at = log_chain, c.sha
            if log_chain - low >= limit:
                if not any(w.start == low_at and w.end == c.sha for w in self.windows):
                    return low_at, c.sha
                log_chain, low, low_at = 0.0, 0.0, c.sha  # gated already: the next stretch starts here
        return None

    def env_changes(self) -> list[tuple[str, str]]:
        """(sha, what changed) where a point's run had another environment than the point before."""
        out, before = [], None
        for p in self.measured():
            if before is not None and p.env and p.env != before:
                out.append((p.sha, "; ".join(mismatches(before, p.env)) or "environment changed"))
            before = p.env or before
        return out

    def subject_of(self, sha: str) -> str:
        if sha == self.base.sha:
            return self.base.subject
        return next((c.subject for c in self.commits if c.sha == sha), "")
