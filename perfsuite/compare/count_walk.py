"""A history by instructions per step: one count per commit (Callgrind's, or the CPU's hardware
counter's: perfsuite.measuring.instructions), each against the commit before it that was counted, a
change flagged past the threshold. No rechecks: under Callgrind the same code counts the same in
every count of one server (reports/work/), so a count's move is the code's; a hardware count moves
a little from run to run (about 0.2% on rustc-perf's machines), under the default threshold.
The walk is a document (kind "count-history") kept in a log: a later walk over the same commits on
the same machine reuses their counts, so `--update` counts only the commits that came since.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field, replace
from typing import Annotated, Any

from pydantic import Field

from perfsuite.compare.bisection import Commit
from perfsuite.compare.count_bisection import Counted, counted
from perfsuite.compare.paired_gate import GateVerdict
from perfsuite.core import documents
from perfsuite.core.documents import Name, NonNegative, Params, Positive, Text
from perfsuite.core.errors import ConfigError


@documents.shape("counted commit", frozen=True)
class CountPoint(documents.Result):
    """A commit's count (None: not counted, `reason` says why) and its move from the last counted
    commit before it (None: the first, or not counted); `machine`: the digest of the comparable
    fingerprint it was counted under (a count is reused only under the same). A commit whose move
    was flagged is gated by time against its parent (`history --instructions` without
    --count-only): `by_time` is that gate's verdict, pairs and all, or `by_time_note` says why
    there is none."""

    sha: Name
    subject: Text = ""
    per_step: Positive | None = None
    reason: Text = ""
    seconds: NonNegative | None = None
    moved: float | None = None
    machine: Text = ""
    by_time: GateVerdict | None = None
    by_time_note: Text = ""

    @property
    def commit(self) -> Commit:
        return Commit(self.sha, self.subject)

    def time_line(self) -> str | None:
        """Its gate by time against its parent, or why there is none; None where it was not gated."""
        if self.by_time is not None:
            return f"{self.sha[:12]}: by time against its parent: {self.by_time.describe()}"
        return f"{self.sha[:12]}: by time: {self.by_time_note}" if self.by_time_note else None


@documents.shape("count history", error=ConfigError)
class CountHistory(documents.Result):
    workload: Name
    params: Params
    device: Name
    threshold: Annotated[float, Field(strict=True, ge=0, lt=1)]
    # How the walk was made, which a later walk must share to reuse its counts: every Nth commit,
    # and where the workload file came from (perfsuite.compare.revisions).
    every: Annotated[int, Field(strict=True, ge=1)] = 1
    workloads_from: Name = "tree"
    # How the counts were taken (perfsuite.measuring.instructions.method): "callgrind" or "pmu"
    counter: Name = "callgrind"
    points: Annotated[list[CountPoint], Field(max_length=documents.MAX_GROUPS)] = field(default_factory=list)

    def changed(self, direction: int = 1) -> list[CountPoint]:
        """The points whose count moved past the threshold (1: up, more work; -1: down)."""
        return [p for p in self.points if p.moved is not None and direction * p.moved > self.threshold]

    def lines(self) -> list[str]:
        """One line per commit, oldest first: its count and move, or why it was not counted."""
        out = []
        for p in self.points:
            if p.per_step is None:
                out.append(f"{p.sha[:12]} {p.subject}: not counted: {p.reason}")
                continue
            move = "" if p.moved is None else f" ({p.moved:+.2%})"
            flag = ""
            if p.moved is not None and abs(p.moved) > self.threshold:
                flag = "  <- more instructions" if p.moved > 0 else "  <- fewer instructions"
            out.append(f"{p.sha[:12]} {p.subject}: {p.per_step:,.0f} instructions per step{move}{flag}")
        return out

    def time_lines(self) -> list[str]:
        """One line per flagged commit that was gated by time, or that could not be, oldest first."""
        return [line for p in self.points if (line := p.time_line()) is not None]

    def summary(self) -> str:
        up, down = self.changed(1), self.changed(-1)
        n = sum(p.per_step is not None for p in self.points)
        said = f"{n} of {len(self.points)} commits counted; threshold {self.threshold:.2%}: "
        if not up and not down:
            return said + "no commit moved the instructions per step past it"
        parts = [f"{len(up)} added instructions ({', '.join(p.sha[:12] for p in up)})"] if up else []
        if down:
            parts.append(f"{len(down)} removed some ({', '.join(p.sha[:12] for p in down)})")
        return said + "; ".join(parts)


def walk_by_count(
    state: CountHistory,
    commits: list[Commit],
    count_at: Callable[[Commit], dict[str, Any]],
    machine: str,
    *,
    kept: dict[str, CountPoint] | None = None,
    heard: Callable[[Counted], None] | None = None,
    saved: Callable[[CountHistory], object] | None = None,
) -> CountHistory:
    """Walk `commits` (oldest first) into `state`'s points, each counted once; each counted one's
    move is against the last counted commit before it (one that could not be counted is passed
    over, as git bisect skips). A commit in `kept` counted on the same `machine` is not counted
    again. `saved` is called after each point: a count is never lost to a later one's failure."""
    state.points.clear()
    last: float | None = None
    for commit in commits:
        old = (kept or {}).get(commit.sha)
        reused = old is not None and old.per_step is not None and old.machine == machine
        if reused:
            c = Counted(commit, old.per_step, None, old.seconds)  # type: ignore[union-attr]
        else:
            c = counted(commit, count_at, heard)
        moved = c.per_step / last - 1 if c.per_step is not None and last else None
        per_step = None if c.per_step is None else float(c.per_step)
        seconds = None if c.seconds is None else float(c.seconds)
        point = CountPoint(commit.sha, commit.subject, per_step, c.reason or "", seconds, moved, machine)
        if reused and old is not None:  # a kept count keeps its gate by time (of the commit against its parent)
            point = replace(point, by_time=old.by_time, by_time_note=old.by_time_note)
        state.points.append(point)
        if c.per_step is not None:
            last = c.per_step
        if saved is not None:
            saved(state)
    return state
