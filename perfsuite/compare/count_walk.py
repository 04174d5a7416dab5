"""A history by instructions per step: one Callgrind count per commit, each against the commit
before it that was counted, a change flagged past the threshold. No rechecks: the same code counts
the same to the instruction in every process (reports/work/), so a count's move is the code's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfsuite.compare.bisection import Commit
from perfsuite.compare.count_bisection import Counted, counted


@dataclass(frozen=True)
class CountPoint:
    """A commit's count and its move from the last counted commit before it (None: the first, or
    not counted)."""

    counted: Counted
    moved: float | None = None

    @property
    def commit(self) -> Commit:
        return self.counted.commit


@dataclass
class CountHistory:
    threshold: float
    points: list[CountPoint] = field(default_factory=list)

    def changed(self, direction: int = 1) -> list[CountPoint]:
        """The points whose count moved past the threshold (1: up, more work; -1: down)."""
        return [p for p in self.points if p.moved is not None and direction * p.moved > self.threshold]

    def lines(self) -> list[str]:
        """One line per commit, oldest first: its count and move, or why it was not counted."""
        out = []
        for p in self.points:
            c = p.counted
            if c.per_step is None:
                out.append(f"{c.commit.sha[:12]} {c.commit.subject}: not counted: {c.reason}")
                continue
            move = "" if p.moved is None else f" ({p.moved:+.2%})"
            flag = ""
            if p.moved is not None and abs(p.moved) > self.threshold:
                flag = "  <- more instructions" if p.moved > 0 else "  <- fewer instructions"
            out.append(f"{c.commit.sha[:12]} {c.commit.subject}: {c.per_step:,.0f} instructions per step{move}{flag}")
        return out

    def summary(self) -> str:
        up, down = self.changed(1), self.changed(-1)
        counted = sum(p.counted.per_step is not None for p in self.points)
        said = f"{counted} of {len(self.points)} commits counted; threshold {self.threshold:.2%}: "
        if not up and not down:
            return said + "no commit moved the instructions per step past it"
        parts = [f"{len(up)} added instructions ({', '.join(p.commit.sha[:12] for p in up)})"] if up else []
        if down:
            parts.append(f"{len(down)} removed some ({', '.join(p.commit.sha[:12] for p in down)})")
        return said + "; ".join(parts)


def walk_by_count(
    commits: list[Commit],
    count_at: Callable[[Commit], dict[str, Any]],
    threshold: float,
    heard: Callable[[Counted], None] | None = None,
) -> CountHistory:
    """Count each of `commits` (oldest first) once; each counted one's move is against the last
    counted commit before it (one that could not be counted is passed over, as git bisect skips)."""
    out = CountHistory(threshold)
    last: float | None = None
    for commit in commits:
        c = counted(commit, count_at, heard)
        moved = c.per_step / last - 1 if c.per_step is not None and last else None
        out.points.append(CountPoint(c, moved))
        if c.per_step is not None:
            last = c.per_step
    return out
