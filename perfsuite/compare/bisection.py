"""Which commit made it slower (or, with `direction` -1, faster): bisection over first-parent
commits, as a log of probes.

The state is the log itself: the commits between `good` and `bad` (first-parent, oldest first,
`bad` last) and every probe so far, each the gate's verdict of one commit against `good`
(perfsuite.compare.bisect_probe). The next commit to probe, and the answer, are read from that
log alone, so a bisection that was interrupted resumes from its stored log, and the logic is
tested with a fake prober and no timing.

The first probe is `bad` itself, judged by the gate's own rule (its sequential test and false-alarm
rate, in the bisection's direction): if it is not slower (faster) than `good` there is nothing to
find, and no commit is named; the answer then says whether the pairs showed that or could not
tell (undecided). A caller that has confirmed bad already (a history's recheck) puts that
verdict in the log as bad's probe, and bad is not measured again. Every later probe asks a different question, with the size of the change now
known: is this commit like `good` or like `bad`? Its pairs against `good` are classified by which side of halfway
(between no change and bad's confirmed ratio) their centre lies, measured until a signed-rank test
puts it on one side (`classify`): the gate's own rule would call a commit that carries the whole
5% slowdown "not shown slower" whenever its 15 s of pairs fall short of significance, and a
bisection that takes that for "same" names a later commit. Then, like `git bisect`: the lowest slower commit bounds the range from above, the highest commit
below it that is not slower bounds it from below, and the untested commit nearest the middle is
probed next; a commit that could not be built or run is skipped (never probed again) and the
neighbour nearest the middle is taken instead. When no untested commit is left in the range,
the upper bound is the first slower commit — unless skipped commits lie below it, which could
be the first as well; the answer names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from perfsuite.compare.paired_gate import GateVerdict
from perfsuite.core import documents
from perfsuite.core.documents import Name, NonNegative, Params, Text
from perfsuite.core.errors import ConfigError
from perfsuite.stats import summary as stats
from perfsuite.stats.verdict import ratio_interval

# A probe's outcome: like bad (slower when bisecting a slowdown, faster when bisecting a speed-up),
# like good, or not measured.
CHANGED, SAME, SKIPPED = "changed", "same", "skipped"
# How a bisection ends: the first changed commit, bad shown not changed, or bad not decided.
FOUND, NOT_CHANGED, UNDECIDED = "found", "not changed", "undecided"
# Per look of a probe's classification: the chance of putting a commit on the wrong side of halfway.
CLASSIFY_ALPHA = 0.01


# What a bisection's probes are judged by, stored in its log's settings: a log written under another
# rule (before 2: every probe by the gate's own test; before 3: slowdowns only, "slower" outcomes)
# is not resumed.
PROBE_RULE = 3


def halfway(confirmed_ratio: float | None, threshold: float = 0.0, direction: int = 1) -> float:
    """The log ratio halfway between no change and bad's confirmed change, never nearer 1 than half
    of `threshold` (bad was confirmed beyond 1 + threshold, or below 1 / (1 + threshold) with
    `direction` -1, whatever its pairs' median says)."""
    import math

    floor = math.log1p(max(threshold, 0.0))
    got = math.log(confirmed_ratio) if confirmed_ratio and math.isfinite(confirmed_ratio) else direction * floor
    return direction * max(direction * got, floor) / 2.0


def classify(
    ratios: list[float], mid: float, alpha: float = CLASSIFY_ALPHA, direction: int = 1, units: tuple = ()
) -> str | None:
    """A commit's pairs against good (time ratios) put on one side of `mid` (a log ratio): CHANGED
    when their interval (perfsuite.stats.verdict.ratio_interval at `alpha` per end: the one-sided
    Wilcoxon signed-rank test inverted) lies beyond it, on bad's side, SAME when it lies on
    good's, None while it straddles `mid`. `units` (each pair's pairing of side processes) widen
    the interval by how much the pairings disagree: a probe's three fresh processes can sit a few
    percent off good's, and an unchanged commit read 0.962 (0.951-0.982) "like bad" beside a 4%
    speed-up (issue 36, minGPT) when only the pairs were read."""
    import math

    if len(ratios) < 6:  # the signed-rank test cannot reach 1% below 7 pairs
        return None
    lo, hi = (math.log(x) if x > 0 else -math.inf for x in ratio_interval(ratios, alpha, units))
    beyond, within = (lo > mid, hi < mid) if direction > 0 else (hi < mid, lo > mid)
    return CHANGED if beyond else SAME if within else None


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{value!r}: expected {', '.join(allowed)}")
    return value


# A commit's subject as perfsuite keeps and shows it: git allows any length (a 150,000-character
# subject made every history across it fail validation, issue 51), a log and a console line do not.
SUBJECT_CHARS = 300


def _short_subject(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SUBJECT_CHARS:
        return value[: SUBJECT_CHARS - 1] + "\u2026"
    return value  # anything else is refused by the field's type


@documents.shape("commit", frozen=True)
class Commit(documents.Result):
    sha: Name
    subject: Annotated[Text, BeforeValidator(_short_subject)] = ""


@documents.shape("skipped commit", frozen=True)
class Skipped(Commit):
    """A commit that could not be built or run, with the error that skipped it."""

    error: Text = ""


@documents.shape("probe", frozen=True)
class Probe(documents.Result):
    """One commit measured against `good`: changed (like bad), same (like good), or skipped (with the
    error that skipped it)."""

    DERIVED = {"median_ratio": "median_ratio"}

    sha: Name
    outcome: Annotated[str, AfterValidator(lambda o: _one_of(o, (CHANGED, SAME, SKIPPED)))]
    verdict: GateVerdict | None = None  # the gate's verdict of good (A) against this commit (B)
    error: Text = ""
    seconds: NonNegative = 0.0

    @field_validator("outcome", mode="before")
    @classmethod
    def _rule_2(cls, outcome: Any) -> Any:
        # Logs of rule 2 and before bisected slowdowns only, and called "like bad" slower.
        return CHANGED if outcome == "slower" else outcome

    @model_validator(mode="after")
    def _measured_has_its_pairs(self) -> Probe:
        """A probe said changed or same rests on its pairs: one without a verdict (a log edited by
        hand) would let a resumed bisection name a commit nothing measured (issue 51)."""
        if self.outcome != SKIPPED and self.verdict is None:
            raise ValueError(f"probe of {self.sha[:12]}: outcome {self.outcome!r} without its verdict (the pairs)")
        return self

    @property
    def ratios(self) -> list[float]:
        return list(self.verdict.run.ratios) if self.verdict else []

    @property
    def median_ratio(self) -> float | None:
        """This commit's step time over good's, the median of the pairs."""
        return stats.median(self.ratios) if self.ratios else None

    @property
    def gate(self) -> GateVerdict | None:
        """The verdict (its word and interval); None when skipped."""
        return self.verdict

    @property
    def word(self) -> str | None:
        """slower / faster / same / undecided (perfsuite.stats.verdict), from the stored pairs."""
        return self.verdict.word if self.verdict else None


@documents.shape("bisection answer", frozen=True)
class Answer(documents.Result):
    """How a bisection ended: `bad` not changed or undecided, or the first changed commit (and the
    skipped commits that could have been first instead)."""

    state: Annotated[str, AfterValidator(lambda s: _one_of(s, (FOUND, NOT_CHANGED, UNDECIDED)))]
    commit: Commit | None = None
    probe: Probe | None = None  # the named commit's own probe against good
    confirmation: Probe | None = None  # bad against good
    could_also_be: tuple[Commit, ...] = ()
    skipped: tuple[Skipped, ...] = ()  # every commit skipped, with its error


@documents.shape("bisection", error=ConfigError)
class Bisection(documents.Result):
    """The log of one bisection; what to probe next and the answer are derived from it."""

    DERIVED = {"bad": "bad_sha"}

    workload: Name
    params: Params
    device: Name
    good: Commit
    # First-parent after good, oldest first; the last is bad.
    commits: Annotated[list[Commit], Field(min_length=1, max_length=documents.MAX_GROUPS)]
    settings: dict = field(default_factory=dict)  # how each probe gates: budget, builds, threshold...
    probes: Annotated[list[Probe], Field(max_length=documents.MAX_GROUPS)] = field(default_factory=list)

    @property
    def direction(self) -> int:
        """1: the first slower commit is sought; -1: the first faster one (settings["direction"])."""
        return -1 if self.settings.get("direction") == "faster" else 1

    @property
    def bad(self) -> Commit:
        return self.commits[-1]

    @property
    def bad_sha(self) -> str:
        return self.bad.sha

    def outcome(self, sha: str) -> str | None:
        """The latest probe's outcome for `sha`; None when it was never probed."""
        for p in reversed(self.probes):
            if p.sha == sha:
                return p.outcome
        return None

    def probe_of(self, sha: str) -> Probe | None:
        return next((p for p in reversed(self.probes) if p.sha == sha), None)

    def forced(self) -> list[Probe]:
        """The probes whose pairs could not tell good from bad in their whole budget and were put
        on a side by their median (perfsuite.compare.bisect_probe): an answer that rests on them
        rests on a coin."""
        return [p for p in self.probes if p.verdict and any(n.startswith("undecided") for n in p.verdict.notes)]

    def _bounds(self) -> tuple[int, int]:
        """(highest index known like good below hi, or -1 for good; lowest index known like bad)."""
        found = [self.outcome(c.sha) for c in self.commits]
        hi = next(i for i, o in enumerate(found) if o == CHANGED)
        lo = max((i for i in range(hi) if found[i] == SAME), default=-1)
        return lo, hi

    def next_commit(self) -> Commit | None:
        """The commit to probe next; None when the bisection is over."""
        confirmed = self.outcome(self.bad.sha)
        if confirmed is None:
            return self.bad
        if confirmed != CHANGED:
            return None
        lo, hi = self._bounds()
        open_ = [i for i in range(lo + 1, hi) if self.outcome(self.commits[i].sha) is None]
        if not open_:
            return None
        middle = (lo + hi) / 2
        return self.commits[min(open_, key=lambda i: (abs(i - middle), i))]

    def answer(self) -> Answer:
        """The end of the bisection (call when next_commit() is None)."""
        skipped = tuple(
            Skipped(c.sha, c.subject, p.error)
            for c in self.commits
            if (p := self.probe_of(c.sha)) is not None and p.outcome == SKIPPED
        )
        confirmation = self.probe_of(self.bad.sha)
        if confirmation is None:
            raise ValueError("the bisection has not started: bad was never probed")
        if confirmation.outcome == SKIPPED:
            raise ConfigError(f"--bad {self.bad.sha[:12]}: could not be measured against --good: {confirmation.error}")
        if confirmation.outcome == SAME:
            from perfsuite.stats import verdict

            state = UNDECIDED if confirmation.word == verdict.UNDECIDED else NOT_CHANGED
            return Answer(state, confirmation=confirmation, skipped=skipped)
        lo, hi = self._bounds()
        could = tuple(self.commits[i] for i in range(lo + 1, hi) if self.outcome(self.commits[i].sha) == SKIPPED)
        named = self.commits[hi]
        return Answer(FOUND, named, self.probe_of(named.sha), confirmation, could, skipped)

    def same_question(self, other: Bisection) -> bool:
        """Whether `other` (a stored log) bisects the same thing, so its probes can be reused."""
        return (
            self.workload,
            self.params,
            self.device,
            self.good.sha,
            [c.sha for c in self.commits],
            self.settings,
        ) == (
            other.workload,
            other.params,
            other.device,
            other.good.sha,
            [c.sha for c in other.commits],
            other.settings,
        )


def run_bisection(
    state: Bisection,
    prober: Callable[[Commit, Probe | None], Probe],
    after_probe: Callable[[Bisection, Probe], None] = lambda s, p: None,
) -> Answer:
    """Probe until the answer is known; `after_probe` runs after each (save the log, say so). The
    prober is given the commit and bad's confirmation (None when it is asked to confirm bad)."""
    while (commit := state.next_commit()) is not None:
        probe = prober(commit, None if commit == state.bad else state.probe_of(state.bad.sha))
        if probe.sha != commit.sha:
            raise ValueError(f"the prober answered for {probe.sha[:12]}, asked for {commit.sha[:12]}")
        state.probes.append(probe)
        after_probe(state, probe)
    return state.answer()
