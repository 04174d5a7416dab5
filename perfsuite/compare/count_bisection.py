"""Bisection by instructions per step: one count per commit, no rechecks, the same answer every time.

Time cannot see a 1% change on a shared 2-core VM (processes differ by 2-18%); Callgrind's count of
the same code is the same to the instruction in every process (reports/work/). So a commit is put
with good or bad by one count: with bad when its count has moved from good's by more than half of
bad's move (the halfway rule time bisection uses, with no noise to allow for). A commit that cannot
be counted (its workload file fails, Callgrind fails) is skipped, as `git bisect skip` would be; when
the skips leave no commit to decide between two, the answer is the range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfsuite.compare.bisection import Commit
from perfsuite.compare.work import INSTRUCTION_THRESHOLD
from perfsuite.core.errors import ConfigError


@dataclass(frozen=True)
class Counted:
    """One commit's count: instructions per step, or why there is none."""

    commit: Commit
    per_step: float | None
    reason: str | None = None
    seconds: float | None = None


@dataclass
class CountBisection:
    good: Counted
    bad: Counted
    threshold: float
    direction: int  # 1: the commit that added instructions; -1: the one that removed them
    counted: list[Counted] = field(default_factory=list)  # the commits between, in the order counted
    first: Commit | None = None  # the answer
    range: tuple[Commit, ...] = ()  # the commits it could not tell apart (skips), the answer among them

    @property
    def moved(self) -> float:
        assert self.good.per_step and self.bad.per_step
        return self.bad.per_step / self.good.per_step - 1

    def answer(self) -> str:
        how = f"{self.moved:+.2%} instructions per step ({self.good.per_step:,.0f} -> {self.bad.per_step:,.0f})"
        if self.direction * self.moved <= self.threshold:
            more = "more" if self.direction > 0 else "fewer"
            return f"bad does not execute {more} instructions than good beyond {self.threshold:.1%}: {how}"
        if self.first is not None:
            return f"first commit: {self.first.sha[:12]} {self.first.subject}: bad is {how}"
        shas = ", ".join(c.sha[:12] for c in self.range)
        return f"one of {shas} (the others between could not be counted): bad is {how}"


def counted(
    commit: Commit, count_at: Callable[[Commit], dict[str, Any]], heard: Callable[[Counted], None] | None = None
) -> Counted:
    """One commit counted (`count_at`: an instruction count block, perfsuite.measuring.instructions.count)."""
    got = count_at(commit)
    c = Counted(
        commit, got.get("per_step") if got.get("status") == "ok" else None, got.get("reason"), got.get("seconds")
    )
    if heard is not None:
        heard(c)
    return c


def bisect_by_count(
    commits: list[Commit],
    good: Commit,
    count_at: Callable[[Commit], dict[str, Any]],
    threshold: float = INSTRUCTION_THRESHOLD,
    direction: int = 1,
    heard: Callable[[Counted], None] | None = None,
) -> CountBisection:
    """The first of `commits` (after `good`, bad last, oldest first) whose instructions per step
    moved like bad's. `count_at(commit)` is an instruction count block
    (perfsuite.measuring.instructions.count). Good and bad are counted first; either failing is
    bad input (ConfigError naming it)."""

    g, b = counted(good, count_at, heard), counted(commits[-1], count_at, heard)
    for flag, c in (("--good", g), ("--bad", b)):
        if c.per_step is None:
            raise ConfigError(f"{flag} {c.commit.sha[:12]}: its instructions cannot be counted: {c.reason}")
    out = CountBisection(g, b, threshold, direction)
    if direction * out.moved <= threshold:
        return out
    assert g.per_step is not None and b.per_step is not None
    lo, hi, skipped = -1, len(commits) - 1, set()  # lo: the last like good (-1: good), hi: the first known like bad
    while True:
        open_ = [i for i in range(lo + 1, hi) if i not in skipped]
        if not open_:
            break
        centre = (lo + hi) / 2
        mid = min(open_, key=lambda i: (abs(i - centre), i))
        c = counted(commits[mid], count_at, heard)
        out.counted.append(c)
        if c.per_step is None:
            skipped.add(mid)
        elif abs(c.per_step - g.per_step) > abs(b.per_step - g.per_step) / 2:
            hi = mid
        else:
            lo = mid
    between = [i for i in range(lo + 1, hi + 1)]
    if len(between) == 1:
        out.first = commits[hi]
    else:  # the skipped commits before hi: any of them, or hi, may be the one
        out.range = tuple(commits[i] for i in between)
    return out
