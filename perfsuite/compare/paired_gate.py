"""A regression gate that can see a few percent on a noisy shared machine.

Separate processes differ by up to +-20% here (docs/peers.md), so the gate never
compares two runs: it interleaves the two versions of a step in one process, in A B B A
order, block after block, and judges the per-pair time ratios B/A, in which slow drift
cancels. The pairs rotate through several builds of each side (BUILDS): two builds of the same
code differ by a percent or two, and averaging over builds takes that out of the comparison.
One sequential test (perfsuite.stats.sequential) spends the whole budget: a one-sided Wilcoxon
signed-rank test on the log ratios against log(1 + threshold), read at half, three quarters
and all of the budget with O'Brien-Fleming alpha spending, so a clear slowdown stops early and
the false-alarm rate stays at ALPHA overall; Benjamini-Hochberg then holds it across the cases
of one gate. (Until issue 16 a first run used half the budget and a confirmation run the other
half: only half the pairs ever entered one test, and 3% was caught in 11 of 20 trials. A sign
test before that caught 9 of 20.) `threads` sets torch's threads for the gate: on a 2-core
machine that others load, one thread avoids the barrier stalls of a two-thread step whose
second thread another process has displaced; on a quiet one two threads give more pairs
(reports/gate/README.md). The threshold per case is the larger of the requested effect and the
case's noise floor, learned from A-against-A runs of the unchanged code.

Page faults were the largest noise left on CPU: glibc hands freed activations and gradients
back to the kernel and the next step faults them in again (~2,400 faults per ResNet18 pair, a
per-pair SD of 10-18% against 2-3% without). `perfsuite gate` therefore holds the heap
(perfsuite.measuring.heap, `--heap steady`, the default) and runs the builds, in the pairs'
order, until they stop faulting before the budget starts; each verdict says how many faults
per pair were left.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, StrictBool, Tag, model_validator

from perfsuite.compare import work
from perfsuite.compare.energy_pairs import EnergyVerdict
from perfsuite.core import documents
from perfsuite.core.case import Case, Context, Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.documents import Count, Finite, Name, NonNegative, SampleList, Text
from perfsuite.measuring import counted, heap
from perfsuite.measuring.interleave import interleaved_blocks
from perfsuite.measuring.runner import calibrate
from perfsuite.measuring.timing import Clock
from perfsuite.stats import sequential, verdict
from perfsuite.stats import summary as stats

Step = Callable[[], object]


# Blocks of about this long (a slow step is one call): short, so that drift within a pair stays
# small and the budget buys many pairs.
BLOCK_S = 0.01
ALPHA = 0.01  # false alarms per unchanged case, overall (the sequential test keeps it across looks)
# Builds of each side the pairs rotate through: two builds of the same code can differ by a
# percent or two (memory placement, denormals in their random weights), and averaging over
# builds removes that from the comparison instead of raising the threshold over it.
BUILDS = 3
# The side-process gate splits its budget into rounds of at least ROUND_MIN_S, at most this many,
# each in fresh processes that draw their own memory layouts, ROUND_BUILDS a side: each round is
# one unit of the interval (pooled), so the default 15 s gives twelve rounds and 11 degrees of
# freedom, a 30 s gate 24, a 60 s gate 48 (perfsuite.compare.gate_sides.GateArms.measure, issue 49). One process
# a side a round, not three: under load a round's processes share the load's moment, so its
# pairings are one unit anyway, and twelve rounds of one start as many processes as four rounds
# of three did. The spread between rounds (a layout's 1.5% SD quiet) shrinks only with more
# rounds, so a longer gate gets more of them, not longer ones, up to this many. *Same* needs the
# whole interval within the threshold: with rounds spreading 1.9% (SD) quiet, 24 rounds give a 98%
# half-width of about 0.97%, which leaves a 1% band no room for the centre's own error; 48 give
# 0.66% (reports/gate/load/README.md, section 10).
ROUNDS = 48
ROUND_BUILDS = 1
# A round's share of the budget is at least this long: each round pays a fork, a build and the
# heap's settling per process, and its pairs need to be enough for its centre (MIN_PAIRS at the
# least); a shorter budget runs fewer rounds, never fewer than MIN_ROUNDS (rounds_for).
ROUND_MIN_S = 1.25
WARMUP_SHARE = 0.1  # of the budget, shared by the warm-ups of every build
MIN_PAIRS = 6
# With the heap held steady (perfsuite.measuring.heap), the builds run in turn before the budget
# until no page faults: set-up like the builds themselves, at most this long.
SETTLE_MAX_S = 10.0


@documents.shape("paired run", frozen=True)
class PairedRun(documents.Result):
    ratios: SampleList  # per pair: time_b / time_a
    block_size: Annotated[int, Field(strict=True, ge=1, le=documents.MAX_INT)]
    looks: tuple[dict, ...] = ()  # per look read: pairs so far, p, the look's boundary, seconds
    decision: Name | None = None  # sequential.SLOWER / NOT_SLOWER; None when no test was read
    p: Finite = 1.0  # on the alpha scale: below alpha exactly when the test said slower
    # heap.settle's account before the budget ({"sides": [...]}: one per side process); None: not held
    settle: dict | None = None
    faults_per_pair: NonNegative = 0.0  # minor page faults per pair while the pairs ran
    # Per pair, which pairing of builds (or side processes) it came from: A's j-th with B's j-th.
    # Empty: one pairing (or a document written before they were kept).
    units: tuple[Count, ...] = ()
    # Per pair, A's seconds per step (B's is A's times the ratio): a commit's absolute time in a
    # history comes from its pairs. Empty in documents written before 2026-11-28.
    seconds_a: SampleList = field(default_factory=list)
    # What timed the blocks: a wall clock's method, or sides.CPU_TIME (each side's timing thread's
    # CPU time: sides.SideClock.for_sides). None in documents written before 2026-11-29.
    clock: Name | None = None

    @property
    def median(self) -> float:
        """The ratio's estimate, not the pairs' median (the name is the documents'): the mean of the
        pairings' Hodges-Lehmann centres, or without pairings the pairs' own
        (perfsuite.stats.verdict.ratio_estimate), so that it lies inside the interval."""
        return verdict.ratio_estimate(self.ratios, self.units)

    @property
    def median_a_s(self) -> float | None:
        """A's median seconds per step over the pairs; None when not kept."""
        return stats.median(self.seconds_a) if self.seconds_a else None

    @property
    def median_b_s(self) -> float | None:
        """B's median seconds per step over the pairs (A's times each pair's ratio)."""
        if not self.seconds_a or len(self.seconds_a) != len(self.ratios):
            return None
        return stats.median([a * r for a, r in zip(self.seconds_a, self.ratios)])

    def p_slower(self, threshold: float, direction: int = 1) -> float:
        """The signed-rank p of "B slower than A by the threshold" (direction -1: faster)."""
        # Log ratios: a slowdown and the matching speed-up are symmetric around 0.
        return verdict.p_greater([direction * math.log(r) for r in self.ratios], math.log1p(threshold), self.units)


def _b_first(j: int, k: int) -> bool:
    """Whether the j-th call of two pairs (over k pairings of builds) starts with B: alternate
    calls, as interleave.py's warm turn asks, and alternate visits of each pairing. With an odd k
    the first gives the second; with an even k, alternating by j alone gave pairing 0 A B B A
    every time and pairing 1 B A A B, so the warm turn (4-8% on a 0.5 ms CPU step) read as a
    difference between pairings, by which ratio_interval widened the interval (history --builds
    2: a +3% recheck read 1.022 (0.976-1.070), reports/history/). Here an even k shifts the
    alternation by one each round; the whole run stays within one call of balanced."""
    return (j + (j // k if k % 2 == 0 else 0)) % 2 == 1


def _builds(step) -> list[Step]:
    return list(step) if isinstance(step, (list, tuple)) else [step]


def paired_ratios(
    step_a,
    step_b,
    clock: Clock,
    budget_s: float,
    block_s: float = BLOCK_S,
    *,
    threshold: float | None = None,
    alpha: float = ALPHA,
    looks: tuple[float, ...] = sequential.LOOKS,
    direction: int = 1,
    on_look=None,
) -> PairedRun:
    """Interleave A and B (A B, then B A, ...) for `budget_s`, in blocks of about `block_s`; each
    pair gives one ratio. `step_a`/`step_b` may be lists of builds: the pairs rotate through them.

    All steps are warmed up first by the runner's calibration (together at most WARMUP_SHARE of
    the budget). With a `threshold`, the sequential test (perfsuite.stats.sequential) is read at each
    look and the run stops as soon as it decides; without one, the pairs fill the budget.
    `direction` -1 asks the mirror question, "is B faster than A by the threshold?" (bisect --faster).
    `on_look(ratios, looks_read, looks_in_all)` is called about once a second and after each look
    (the console's progress line), outside the timed blocks."""

    a, b = _builds(step_a), _builds(step_b)
    # Page faults are the largest noise in a CPU training step's pair ratio; with the heap held,
    # run the builds until they stop (outside the budget, as set-up), in the pairs' own order
    # (A B B A per build): whether the heap must grow depends on the order of the calls.
    order = [
        s for j in range(max(len(a), len(b))) for s in (a[j % len(a)], b[j % len(b)], b[j % len(b)], a[j % len(a)])
    ]
    settled = heap.settle(order, clock.now, SETTLE_MAX_S) if heap.held() else None
    start = clock.now()
    cfg = RunConfig(max_time=budget_s, warmup_min_fraction=0.0, warmup_max_fraction=WARMUP_SHARE / len(a + b))
    cal = calibrate(a + b, clock, cfg, block_s=block_s)
    # Sized on the fastest step; a much slower other side (a self-check's padded step) must not
    # turn one block into minutes.
    slowest = max(w["step_estimate_s"] for w in cal.warmups)
    n = max(1, min(cal.block_size, int(block_s / max(slowest, 1e-12))))
    pairs_s = budget_s - (clock.now() - start)
    ratios: list[float]
    seconds_a: list[float] = []
    t0, ratios, units, read, j = clock.now(), [], [], [], 0
    faults = heap.FaultCount()  # around the timed blocks only: a look's lazy scipy import is not the step's
    marks = looks if threshold is not None else (1.0,)
    bounds = sequential.boundaries(marks, alpha)
    decision, p_scaled, said = None, 1.0, clock.now()
    for k, (frac, bound) in enumerate(zip(marks, bounds)):
        # At least MIN_PAIRS, and every pairing visited for verdict.MIN_UNIT_PAIRS pairs: only
        # then is it a unit of the interval.
        while clock.now() - t0 < frac * pairs_s or len(ratios) < max(MIN_PAIRS, verdict.MIN_UNIT_PAIRS * len(a)):
            # Two pairs of one build of each side, then the next builds.
            with faults:
                # A B B A, then B A A B: each side gets the warm second turn as often (interleave.py).
                ta, tb = interleaved_blocks(
                    a[j % len(a)], b[j % len(b)], clock, n, pairs=2, b_first=_b_first(j, len(a))
                )
            ratios += [y / x for x, y in zip(ta, tb)]
            seconds_a += ta
            units += [j % len(a)] * len(ta)
            j += 1
            if on_look is not None and clock.now() - said >= 1.0:
                on_look(ratios, k, len(marks))
                said = clock.now()
        if threshold is None:
            break
        final = k == len(marks) - 1
        decision, p = look_decision(ratios, units if len(a) > 1 else (), threshold, bound, final, alpha, direction)
        p_scaled = sequential.p_on_alpha_scale(p, bound, alpha)
        read.append({"pairs": len(ratios), "p": p, "boundary": bound, "seconds": clock.now() - t0})
        if on_look is not None:
            on_look(ratios, k + 1, len(marks))
        if decision is not None:
            break
    return PairedRun(
        ratios,
        n,
        tuple(read),
        decision,
        p_scaled,
        settled,
        faults.count / max(len(ratios), 1),
        tuple(units) if len(a) > 1 else (),
        seconds_a,
        getattr(clock, "method", None),
    )


def look_decision(
    ratios: list[float],
    units: tuple[int, ...] | list[int],
    threshold: float,
    bound: float,
    final: bool,
    alpha: float,
    direction: int = 1,
) -> tuple[str | None, float]:
    """One look of the sequential test on the pairs so far (read_look), except that futility's
    "not slower" waits while budget is left and the interval cannot yet say same or faster (issue
    36: a 13.5% speed-up said "same" at 0.865 (0.732-1.002) after half the budget): the decision
    (or None: go on) and the look's p. The gate in one process and the gate over rounds of side
    processes (gate_sides.GateArms) both look through here."""
    decision, p = read_look([direction * math.log(r) for r in ratios], threshold, bound, final, units)
    if (
        decision == sequential.NOT_SLOWER
        and not final
        and verdict.judge(*verdict.ratio_interval(ratios, alpha, units), threshold, False, direction)
        == verdict.UNDECIDED
    ):
        decision = None
    return decision, p


def pooled(runs: list[PairedRun], same_processes: bool = False) -> PairedRun:
    """Runs of one comparison as one: their pairs together, faults averaged over all pairs; the
    test's fields are the caller's to set. Runs in fresh processes (rounds) are one unit of the
    interval each, whatever pairings a round held; with `same_processes` (a probe's looks over the
    same sides) each pairing keeps its number: the same processes are the same unit.

    Why a round and not its pairings: under load the processes of one round share the load's
    moment, and their pairings agree on an offset that the next round does not have (issue 49:
    a -4.9% change read, round by round, 0.94 | 1.13 | 1.11 | 0.96, three pairings a round alike;
    counted as twelve units its interval 0.957-1.109 missed the truth). One round of one gate is
    still its pairings (units as paired_ratios numbered them): nothing else is independent there."""
    if len(runs) == 1:
        return replace(runs[0], looks=(), decision=None, p=1.0)
    ratios: list[float] = []
    units: list[int] = []
    seconds_a: list[float] = []
    faults = 0.0
    for r, run in enumerate(runs):
        ratios += run.ratios
        units += list(run.units or (0,) * len(run.ratios)) if same_processes else [r] * len(run.ratios)
        seconds_a += run.seconds_a
        faults += run.faults_per_pair * len(run.ratios)
    runs_settled = runs[:1] if same_processes else runs  # the same sides settled once
    settles = [side for run in runs_settled if run.settle for side in run.settle.get("sides", [])]
    return PairedRun(
        ratios,
        runs[0].block_size,
        settle={"sides": settles} if settles else None,
        faults_per_pair=faults / max(len(ratios), 1),
        units=tuple(units),
        seconds_a=seconds_a,
        clock=runs[0].clock,
    )


# Rounds a budget is split into at the least, however short (while `rounds` allows): each round is
# one unit of the interval, and two units give t on one degree of freedom, which no slowdown can
# pass (a history screen at --max-time 3 read +58% as 1.579 (0.303-8.217) in two rounds).
MIN_ROUNDS = 4


def rounds_for(budget_s: float, rounds: int = ROUNDS) -> int:
    """How many rounds a budget of `budget_s` seconds is split into: `rounds`, fewer when a round
    would get less than ROUND_MIN_S, but at least MIN_ROUNDS (shorter rounds, then: each still
    gets MIN_PAIRS pairs, paired_ratios' floor)."""
    return max(min(MIN_ROUNDS, rounds), min(rounds, int(budget_s // ROUND_MIN_S)))


def rounds_fitting(budget_s: float, rounds: int, pair_s: float, least_pairs: int = MIN_PAIRS) -> int:
    """`rounds`, or fewer once the first round has shown that a round's least pairs (`least_pairs`
    of `pair_s` seconds each) overrun their share: a 0.5B model's 0.4 s step needs about 5 s for
    them, so a 30 s budget holds 6 such rounds, not 24 that each take 5 s of a 1.25 s share (and
    a build of each side: the gate took ten minutes). Never fewer than MIN_ROUNDS."""
    least_s = least_pairs * max(pair_s, 0.0)
    if least_s * rounds <= budget_s:
        return rounds
    return max(min(MIN_ROUNDS, rounds), int(budget_s // least_s))


def round_looks(looks: tuple[float, ...], rounds: int) -> tuple[int, ...]:
    """After which rounds (1-based) the sequential test is read, for looks given as fractions of
    the budget: each look at the first round end at or past it, the last round always."""
    return tuple(sorted({max(1, min(rounds, math.ceil(f * rounds - 1e-9))) for f in looks} | {rounds}))


def read_look(
    logs: list[float], threshold: float, bound: float, final: bool, units: tuple[int, ...] | list[int] = ()
) -> tuple[str | None, float]:
    """One look of the sequential test on the log ratios so far: (decision or None, p of 'slower
    than the threshold'), each p the pairs' and the pairings' together (verdict.p_greater, the
    test the interval inverts). Futility asks the opposite question of the same pairs: are they
    centred below the threshold?"""
    thr = math.log1p(threshold)
    p = verdict.p_greater(logs, thr, units)
    p_below = verdict.p_greater([-x for x in logs], -thr, units)
    return sequential.decide(p, bound, p_below, final), p


@dataclass
class GateCase:
    label: str
    step_a: Step | list[Step]  # the base: one build, or several the pairs rotate through
    step_b: Step | list[Step]
    floor: float = 0.0


def _sign(direction: int) -> int:
    if direction not in (1, -1):
        raise ValueError("must be 1 or -1")
    return direction


# The fields of PairedRun, which version 1 of a gate verdict kept at its top level.
_RUN_FIELDS = ("ratios", "block_size", "looks", "decision", "p", "settle", "faults_per_pair", "units")


@documents.shape("gate verdict")
class GateVerdict(documents.Result):
    """The gate's verdict on one case: its pairs (`run`), the threshold it tested and whether the test
    confirmed a change after Benjamini-Hochberg; the median, interval and word come from the pairs."""

    DERIVED = {
        "median_ratio": "median_ratio",
        "p": "p",
        "word": "word",
        "interval": "interval",
        "slower": "slower",
        "pairs": "pairs",
    }

    label: Name
    threshold: NonNegative
    run: PairedRun
    # The sequential test's alarm after Benjamini-Hochberg across the gate's cases: B slower than
    # A by the threshold (direction 1), or faster (direction -1, bisect --faster).
    confirmed: StrictBool = False
    notes: list[Text] = field(default_factory=list)
    # The test's false-alarm rate: each end of `interval` is one-sided at it.
    alpha: Annotated[float, Field(gt=0, lt=1)] = ALPHA
    direction: Annotated[int, AfterValidator(_sign)] = 1  # 1: is B slower? -1: is B faster?
    # What kind of change (perfsuite.compare.work), from the two sides' work signatures, exact:
    # "more work" with the operators that changed, "same work" (version 3; "work not recorded").
    work: Name = "work not recorded"
    work_changes: list[Text] = field(default_factory=list)
    # The commits the two sides measured (full shas; a side that was the working tree: the commit it
    # was made from), so a stored verdict says what was gated (issue 50: verdicts() read NaN).
    # None in verdicts written before, and for a gate of one revision against itself.
    base_commit: Name | None = None
    new_commit: Name | None = None
    # Joules per step paired after the pairs (perfsuite.compare.energy_pairs; version 4), or None
    # where it was not asked for.
    energy: EnergyVerdict | None = None

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        """A verdict of version 1 (gate documents, bisection logs and self-checks written before
        2026-11-28) kept its pairs' fields at its top level: they are its `run`."""
        if isinstance(data, dict) and "run" not in data and "ratios" in data:
            run = {k: data[k] for k in _RUN_FIELDS if k in data}
            data = {k: v for k, v in data.items() if k not in _RUN_FIELDS}
            data = {"confirmed": bool(data.get("slower")), **data, "run": run}  # before `confirmed`: slower
        return data

    @property
    def p(self) -> float:
        return self.run.p

    @property
    def median_ratio(self) -> float:
        """The ratio's estimate (PairedRun.median: inside the interval, from the same method)."""
        return self.run.median

    @property
    def pairs(self) -> int:
        return len(self.run.ratios)

    @property
    def slower(self) -> bool:
        return self.confirmed and self.direction > 0

    @property
    def interval(self) -> tuple[float, float]:
        """The ratio's interval: the signed-rank test inverted at `alpha` per end, and with several
        pairings of processes (builds) the t interval of their centres, whichever is wider at each
        end (perfsuite.stats.verdict.ratio_interval)."""
        key = (id(self.run), len(self.run.ratios), self.alpha)  # `run` is replaced, never changed in place
        cached = self.__dict__.get("_interval")
        if cached is None or cached[0] != key:
            cached = self.__dict__["_interval"] = (
                key,
                verdict.ratio_interval(self.run.ratios, self.alpha, self.run.units),
            )
        return cached[1]

    @property
    def confidence(self) -> float:
        return 1.0 - 2.0 * self.alpha

    @property
    def word(self) -> str:
        """slower / faster / same / undecided (perfsuite.stats.verdict.judge): the test decides its
        own direction, the interval the rest, so the word never contradicts the interval."""
        return verdict.judge(*self.interval, self.threshold, self.confirmed, self.direction)

    def describe(self, with_work: bool = True, with_energy: bool = True, word: str | None = None) -> str:
        """The word, ratio and interval, then what kind of change it is where the sides' work
        signatures were taken (every road that shows a verdict: gate, bisect, history, the page).
        `word`: the caller's word in place of this verdict's (a history's screen)."""
        said = [verdict.describe(word or self.word, self.run.median, *self.interval, self.confidence)]
        if self.work != work.UNKNOWN and with_work:
            said.append(work.said(self.work, self.work_changes, self.word))
        if self.energy is not None and with_energy:
            said.append(self.energy.describe())
        return "; ".join(said)


@documents.shape("gate verdict without its pairs", frozen=True)
class GateSummary(documents.Result):
    """A gate verdict written before its pairs were kept (gate documents of early version 1): what
    it holds is all there is (no interval or word can be recomputed without the pairs)."""

    label: Name
    median_ratio: Finite | None
    slower: StrictBool
    threshold: NonNegative | None = None
    decision: Name | None = None


def _entry(d: Any) -> str:
    return "summary" if isinstance(d, dict) and "run" not in d and "ratios" not in d else "pairs"


# A gate document's entry: a verdict with its pairs, or an early one without them.
GATE_ENTRY = Annotated[
    Annotated[GateVerdict, Tag("pairs")] | Annotated[GateSummary, Tag("summary")], Discriminator(_entry)
]


def run_gate(
    cases: list[GateCase], clock: Clock, threshold: float = 0.0, budget_s: float = 15.0, q: float = ALPHA
) -> list[GateVerdict]:
    """Gate every case with one sequential test over its whole budget, then Benjamini-Hochberg at
    `q` across the cases. `threshold` is the smallest slowdown that counts (0: any)."""
    if threshold < 0 or budget_s <= 0:
        raise ValueError("threshold must be >= 0 and budget_s > 0")
    return across_cases([gate_case(c, clock, threshold, budget_s, q) for c in cases], q)


def gate_case(
    c: GateCase,
    clock: Clock,
    threshold: float,
    budget_s: float,
    q: float = ALPHA,
    looks: tuple[float, ...] = sequential.LOOKS,
    direction: int = 1,
    on_look=None,
) -> GateVerdict:
    """One case's sequential test, read at `looks` (fractions of the budget); `slower` is decided
    across cases by `across_cases`."""
    thr = max(threshold, c.floor)
    return GateVerdict(
        c.label,
        thr,
        paired_ratios(
            c.step_a,
            c.step_b,
            clock,
            budget_s,
            threshold=thr,
            alpha=q,
            looks=looks,
            direction=direction,
            on_look=on_look,
        ),
        alpha=q,
        direction=direction,
    )


def across_cases(verdicts: list[GateVerdict], q: float = ALPHA) -> list[GateVerdict]:
    """Benjamini-Hochberg at `q` over the cases' p values: the false-alarm rate holds for the gate."""
    for v, rejected in zip(verdicts, stats.benjamini_hochberg([v.p for v in verdicts], q)):
        v.confirmed = rejected
        if v.run.decision == sequential.SLOWER and not rejected:
            v.notes.append(
                f"{'slower' if v.direction > 0 else 'faster'} by its own test, not after "
                f"Benjamini-Hochberg across {len(verdicts)} cases"
            )
    return verdicts


def slowed(step: Step, extra: Step, count: int) -> Step:
    """`step` followed by `count` calls of `extra`: an injected slowdown for validating gates."""

    def run():
        step()
        for _ in range(count):
            extra()

    return run


def padding_matmul() -> Step:
    """One 256x256 matmul on preallocated inputs: the unit of an injected slowdown (ANCHORS' W2+x%)."""
    import torch

    a, b = torch.randn(256, 256), torch.randn(256, 256)

    def mm():
        torch.mm(a, b)

    return mm


def injected_slowdown(step: Step, fraction: float, clock: Clock):
    """A copy of `step` slower by about `fraction`, padded with 256x256 matmuls.
    Returns (slowed step, matmuls added, estimated fraction)."""
    mm = padding_matmul()
    t_step = stats.median([clock.time_block(step, 1) for _ in range(15)])
    t_mm = stats.median([clock.time_block(mm, 20) / 20 for _ in range(15)])
    count = max(1, round(fraction * t_step / t_mm))
    return slowed(step, mm, count), count, count * t_mm / t_step


def alternate(build_a: Callable[[], Step], build_b: Callable[[], Step], k: int) -> tuple[list[Step], list[Step]]:
    """k builds of each side, made A B A B ...: neither side gets all the later allocations."""
    pairs = [(build_a(), build_b()) for _ in range(k)]
    return [a for a, _ in pairs], [b for _, b in pairs]


def power_and_false_alarms(
    build: Callable[[], Step],
    clock: Clock,
    fraction: float,
    trials: int,
    budget_s: float,
    threshold: float = 0.0,
    builds: int = BUILDS,
) -> dict:
    """Gate `trials` unchanged and `trials` slowed comparisons, each between fresh builds (`builds`
    per side); the rates the gate achieves, and each gate's pairs for power curves."""
    _, count, est = injected_slowdown(build(), fraction, clock)
    mm = padding_matmul()
    caught = false = 0
    runs = []
    for i in range(trials):
        verdicts, seconds = {}, {}
        # The slowed gate goes first in even trials: the first gate of a process (a real gate has
        # only that one) must show its power, and the unchanged one its false alarms, too.
        order = ("slow", "same") if i % 2 == 0 else ("same", "slow")
        for side in order:
            t0 = clock.now()
            b = (lambda: slowed(build(), mm, count)) if side == "slow" else build
            (verdicts[side],) = run_gate([GateCase(side, *alternate(build, b, builds))], clock, threshold, budget_s)
            seconds[side] = clock.now() - t0
        false += verdicts["same"].slower
        caught += verdicts["slow"].slower
        runs.append(
            {side: {**v.to_dict(), "seconds": seconds[side], "first": side == order[0]} for side, v in verdicts.items()}
        )
    return {
        "fraction_requested": fraction,
        "matmuls_added": count,
        "fraction_estimated": est,
        "trials": trials,
        "budget_s": budget_s,
        "builds": builds,
        "threshold": threshold,
        "power": caught / trials,
        "false_alarm_rate": false / trials,
        "caught": caught,
        "false_alarms": false,
        "runs": runs,
    }


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Interval of a rate k/n (Wilson score), for reporting power and false-alarm rates."""
    if n == 0:
        return (0.0, 1.0)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


@dataclass(frozen=True)
class SelfCheck(Measure):
    """A case measured as the gate's self-check: its power against an injected slowdown and its
    false alarms on unchanged code, both arms in this process (power_and_false_alarms)."""

    fraction: float
    trials: int
    threshold: float
    builds: int
    clock: Clock
    kind = "gate-selfcheck"

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> dict:
        build = counted.alike(lambda: case.workload.build(dict(case.params), cfg.device))  # counted once
        res = power_and_false_alarms(
            lambda: build().fn, self.clock, self.fraction, self.trials, cfg.max_time, self.threshold, self.builds
        )
        return {"case": case.label, **res}
