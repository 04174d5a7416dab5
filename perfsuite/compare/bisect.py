"""Which commit made it slower: bisection over first-parent commits, as a log of probes.

The state is the log itself: the commits between `good` and `bad` (first-parent, oldest first,
`bad` last) and every probe so far, each the gate's verdict of one commit against `good`
(perfsuite.compare.bisect_probe). The next commit to probe, and the answer, are read from that
log alone, so a bisection that was interrupted resumes from its stored log, and the logic is
tested with a fake prober and no timing.

The first probe is `bad` itself, judged by the gate's own rule (its sequential test and false-alarm
rate): if it is not slower than `good` there is nothing to find, and no commit is named. Every
later probe asks a different question, with the size of the slowdown now known: is this commit
like `good` or like `bad`? Its pairs against `good` are classified by which side of halfway
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

from dataclasses import dataclass, field
from typing import Callable

from perfsuite.core.errors import ConfigError
from perfsuite.stats import summary as stats

SLOWER, SAME, SKIPPED = "slower", "same", "skipped"
NOT_SLOWER, FOUND = "not slower", "found"
# Per look of a probe's classification: the chance of putting a commit on the wrong side of halfway.
CLASSIFY_ALPHA = 0.01


# What a bisection's probes are judged by, stored in its log's settings: a log written under another
# rule (before 2: every probe by the gate's own test) is not resumed.
PROBE_RULE = 2


def halfway(confirmed_ratio: float | None, threshold: float = 0.0) -> float:
    """The log ratio halfway between no change and bad's confirmed slowdown, never below half of
    `threshold` (bad was confirmed slower than 1 + threshold, whatever its pairs' median says)."""
    import math

    floor = 1.0 + max(threshold, 0.0)
    ratio = confirmed_ratio if confirmed_ratio is not None and math.isfinite(confirmed_ratio) else floor
    return math.log(max(ratio, floor)) / 2.0


def classify(ratios: list[float], mid: float, alpha: float = CLASSIFY_ALPHA) -> str | None:
    """A commit's pairs against good (time ratios) put on one side of `mid` (a log ratio): SLOWER
    when their centre is above it at level `alpha` (one-sided Wilcoxon signed rank), SAME when
    below, None while the pairs cannot tell."""
    import math

    logs = [math.log(r) for r in ratios]
    if len(logs) < 6:  # the signed-rank test cannot reach 1% below 7 pairs
        return None
    if stats.signed_rank_greater(logs, mid) < alpha:
        return SLOWER
    if stats.signed_rank_greater([-x for x in logs], -mid) < alpha:
        return SAME
    return None


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    def to_dict(self) -> dict:
        return {"sha": self.sha, "subject": self.subject}

    @classmethod
    def from_dict(cls, d: dict) -> "Commit":
        return cls(str(d["sha"]), str(d.get("subject", "")))


@dataclass(frozen=True)
class Probe:
    """One commit measured against `good`: slower, same, or skipped (with the error that skipped it)."""

    sha: str
    outcome: str
    verdict: dict | None = None  # GateVerdict.to_dict() of good (A) against this commit (B)
    error: str = ""
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.outcome not in (SLOWER, SAME, SKIPPED):
            raise ValueError(f"probe outcome {self.outcome!r}: expected {SLOWER}, {SAME} or {SKIPPED}")

    @property
    def ratios(self) -> list[float]:
        return list((self.verdict or {}).get("ratios") or [])

    @property
    def median_ratio(self) -> float | None:
        """This commit's step time over good's, the median of the pairs."""
        return stats.median(self.ratios) if self.ratios else None

    @property
    def ratio_ci(self) -> tuple[float, float] | None:
        return stats.median_ci(self.ratios) if len(self.ratios) > 1 else None

    def to_dict(self) -> dict:
        return {"sha": self.sha, "outcome": self.outcome, "verdict": self.verdict, "error": self.error,
                "seconds": self.seconds, "median_ratio": self.median_ratio,
                "ratio_ci": list(self.ratio_ci) if self.ratio_ci else None}

    @classmethod
    def from_dict(cls, d: dict) -> "Probe":
        """Back from to_dict(); the ratio and its interval are recomputed from the verdict's pairs."""
        return cls(str(d["sha"]), str(d["outcome"]), d.get("verdict"), str(d.get("error", "")),
                   float(d.get("seconds", 0.0)))


@dataclass(frozen=True)
class Answer:
    """How a bisection ended: `bad` not slower, or the first slower commit (and the skipped commits
    that could have been first instead)."""

    state: str  # NOT_SLOWER or FOUND
    commit: Commit | None = None
    probe: Probe | None = None  # the named commit's own probe against good
    confirmation: Probe | None = None  # bad against good
    could_also_be: tuple[Commit, ...] = ()
    skipped: tuple[tuple[Commit, str], ...] = ()  # every commit skipped, with its error

    def to_dict(self) -> dict:
        return {"state": self.state, "commit": self.commit.to_dict() if self.commit else None,
                "probe": self.probe.to_dict() if self.probe else None,
                "confirmation": self.confirmation.to_dict() if self.confirmation else None,
                "could_also_be": [c.to_dict() for c in self.could_also_be],
                "skipped": [{**c.to_dict(), "error": e} for c, e in self.skipped]}


@dataclass
class Bisection:
    """The log of one bisection; what to probe next and the answer are derived from it."""

    workload: str
    params: dict
    device: str
    good: Commit
    commits: list[Commit]  # first-parent after good, oldest first; the last is bad
    settings: dict = field(default_factory=dict)  # how each probe gates: budget, builds, threshold...
    probes: list[Probe] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.commits:
            raise ConfigError("no commits between --good and --bad")

    @property
    def bad(self) -> Commit:
        return self.commits[-1]

    def outcome(self, sha: str) -> str | None:
        """The latest probe's outcome for `sha`; None when it was never probed."""
        for p in reversed(self.probes):
            if p.sha == sha:
                return p.outcome
        return None

    def probe_of(self, sha: str) -> Probe | None:
        return next((p for p in reversed(self.probes) if p.sha == sha), None)

    def _bounds(self) -> tuple[int, int]:
        """(highest index known not slower below hi, or -1 for good; lowest index known slower)."""
        found = [self.outcome(c.sha) for c in self.commits]
        hi = next(i for i, o in enumerate(found) if o == SLOWER)
        lo = max((i for i in range(hi) if found[i] == SAME), default=-1)
        return lo, hi

    def next_commit(self) -> Commit | None:
        """The commit to probe next; None when the bisection is over."""
        confirmed = self.outcome(self.bad.sha)
        if confirmed is None:
            return self.bad
        if confirmed != SLOWER:
            return None
        lo, hi = self._bounds()
        open_ = [i for i in range(lo + 1, hi) if self.outcome(self.commits[i].sha) is None]
        if not open_:
            return None
        middle = (lo + hi) / 2
        return self.commits[min(open_, key=lambda i: (abs(i - middle), i))]

    def answer(self) -> Answer:
        """The end of the bisection (call when next_commit() is None)."""
        skipped = tuple((c, self.probe_of(c.sha).error) for c in self.commits if self.outcome(c.sha) == SKIPPED)
        confirmation = self.probe_of(self.bad.sha)
        if confirmation is None:
            raise ValueError("the bisection has not started: bad was never probed")
        if confirmation.outcome == SKIPPED:
            raise ConfigError(f"--bad {self.bad.sha[:12]}: could not be measured against --good: "
                              f"{confirmation.error}")
        if confirmation.outcome == SAME:
            return Answer(NOT_SLOWER, confirmation=confirmation, skipped=skipped)
        lo, hi = self._bounds()
        could = tuple(self.commits[i] for i in range(lo + 1, hi) if self.outcome(self.commits[i].sha) == SKIPPED)
        named = self.commits[hi]
        return Answer(FOUND, named, self.probe_of(named.sha), confirmation, could, skipped)

    def to_dict(self) -> dict:
        return {"workload": self.workload, "params": self.params, "device": self.device,
                "good": self.good.to_dict(), "bad": self.bad.sha, "commits": [c.to_dict() for c in self.commits],
                "settings": self.settings, "probes": [p.to_dict() for p in self.probes]}

    @classmethod
    def from_dict(cls, d: dict) -> "Bisection":
        return cls(d["workload"], dict(d["params"]), d["device"], Commit.from_dict(d["good"]),
                   [Commit.from_dict(c) for c in d["commits"]], dict(d.get("settings", {})),
                   [Probe.from_dict(p) for p in d.get("probes", [])])

    def same_question(self, other: "Bisection") -> bool:
        """Whether `other` (a stored log) bisects the same thing, so its probes can be reused."""
        return (self.workload, self.params, self.device, self.good.sha, [c.sha for c in self.commits],
                self.settings) == (other.workload, other.params, other.device, other.good.sha,
                                   [c.sha for c in other.commits], other.settings)


def run_bisection(state: Bisection, prober: Callable[[Commit, Probe | None], Probe],
                  after_probe: Callable[[Bisection, Probe], None] = lambda s, p: None) -> Answer:
    """Probe until the answer is known; `after_probe` runs after each (save the log, say so). The
    prober is given the commit and bad's confirmation (None when it is asked to confirm bad)."""
    while (commit := state.next_commit()) is not None:
        probe = prober(commit, None if commit == state.bad else state.probe_of(state.bad.sha))
        if probe.sha != commit.sha:
            raise ValueError(f"the prober answered for {probe.sha[:12]}, asked for {commit.sha[:12]}")
        state.probes.append(probe)
        after_probe(state, probe)
    return state.answer()
