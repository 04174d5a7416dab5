"""The words a comparison ends in, and the interval that goes with each: one rule for every road.

    word = SLOWER     if the test says slower than 1 + threshold (its interval then lies above it)
           FASTER     elif the interval lies below 1 / (1 + threshold)
           SAME       elif the interval lies within 1 / (1 + threshold) .. 1 + threshold
           UNDECIDED  otherwise: the pairs cannot tell; more time or a quieter machine would

"Same" is a claim too: an interval 0.73-1.00 around a median 13.5% faster is not shown faster,
but it is not shown the same either (issue 36's nanoGPT flash-attention gate said "same" there,
and "faster, 0.866 (0.796-0.892)" on the rerun).

A gate's pairs are judged by a one-sided Wilcoxon signed-rank test on their log ratios
(perfsuite.stats.sequential). The interval printed beside the verdict is that test inverted
(`signed_rank_interval`): the lower end is the largest centre the test would still reject
"centred above", so "slower at level a" and "the level-a interval lies above the threshold" are
one statement, and a verdict cannot contradict its own interval (issue 36: bisect said "same,
1.031 (95% CI 1.010-1.050)" beside a 1% threshold, because its interval and its test were
different statistics at different levels). "Undecided" is kept apart from "same": a median 7.7%
slower over 88 pairs that the test could not confirm is not "ok".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from perfsuite.stats.summary import signed_rank_greater

SLOWER, FASTER, SAME, UNDECIDED = "slower", "faster", "same", "undecided"
WORDS = (SLOWER, FASTER, SAME, UNDECIDED)
# Exit status of a command whose verdict is undecided (docs/commands.md): apart from 0 (same or
# faster) and 1 (a confirmed slowdown), so CI can choose what "could not tell" means to it.
EXIT_UNDECIDED = 5
UNDECIDED_ADVICE = "needs more time (--max-time) or a quieter machine"
# Halvings in the search for an interval's end: 36 put it within 1e-11 of the pairs' span.
_BISECT_STEPS = 36


def signed_rank_interval(logs: Sequence[float], level: float) -> tuple[float, float]:
    """(lo, hi) on the log scale: lo the largest c with signed_rank_greater(logs, c) < level (the
    test of 'centred above c' rejects for every c below it), hi the mirror image. Each end is
    one-sided at `level`, so the two-sided confidence is 1 - 2 level. Unbounded ends are -inf/inf
    (too few pairs for the test to reach `level`)."""
    xs = [float(x) for x in logs]
    if not xs:
        return (-math.inf, math.inf)
    return (_lower_end(xs, level), -_lower_end([-x for x in xs], level))


def _lower_end(xs: list[float], level: float) -> float:
    """Bisection on c of a p value that rises with c: the test itself, so the end is its inversion."""
    span = max(xs) - min(xs)
    lo, hi = min(xs) - max(span, 1e-9), max(xs)
    if signed_rank_greater(xs, lo) >= level:  # not even below every pair: the data cannot reach level
        return -math.inf
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        if signed_rank_greater(xs, mid) < level:
            lo = mid
        else:
            hi = mid
    return lo


def judge(lo: float, hi: float, threshold: float, confirmed: bool | None = None, direction: int = 1) -> str:
    """The word for an interval (lo, hi) of a ratio new/base. `confirmed`: the decision of the test
    that governs the alarm (the gate's sequential test after Benjamini-Hochberg) in its
    `direction` (1: slower, -1: faster, as bisect --faster asks); None: the interval decides it too."""
    if direction < 0:  # the mirror question on the inverted ratio, its answer mirrored back
        word = judge(1.0 / hi if hi > 0 else math.inf, 1.0 / lo if lo > 0 else math.inf, threshold, confirmed)
        return {SLOWER: FASTER, FASTER: SLOWER}.get(word, word)  # same: no speed-up beyond the threshold
    up = 1.0 + threshold
    if lo > up and confirmed is not False:  # an alarm whose interval reaches the threshold is undecided
        return SLOWER
    if hi < 1.0 / up:
        return FASTER
    if hi <= up and lo >= 1.0 / up:
        return SAME
    return UNDECIDED


def ratio_interval(ratios: Sequence[float], level: float, units: Sequence[int] = ()) -> tuple[float, float]:
    """signed_rank_interval of the pairs' ratios, as ratios, widened by the pairings' spread.

    Pairs are not independent when they come from a few pairings of processes (A's j-th side
    process against B's j-th): each process has its own placement, a few percent here, and every
    pair of one pairing shares it. The test on the pairs sees only the spread inside pairings, so
    with `units` (each pair's pairing) the interval's ends move out by z * s_b / sqrt(k), s_b the
    SD between the k pairings' median log ratios beyond their own sampling noise (the same
    variance components as stats.summary.process_spread). Two A/A gates on a loaded VM read 0.96
    "faster" before this (reports/gate/sides-*)."""
    logs = [math.log(r) for r in ratios]
    lo, hi = signed_rank_interval(logs, level)
    extra = _between_units(logs, units, level) if units else 0.0
    if extra > 0 and math.isfinite(lo) and math.isfinite(hi):
        centre = float(np.median(logs))
        lo = centre - math.hypot(centre - lo, extra)
        hi = centre + math.hypot(hi - centre, extra)
    return (math.exp(lo) if lo > -math.inf else 0.0, math.exp(hi) if hi < math.inf else math.inf)


def _between_units(logs: list[float], units: Sequence[int], level: float) -> float:
    """z(1 - level) times the SD of the mean of the pairings' median log ratios that is between
    pairings (0 with fewer than two pairings of at least 4 pairs each)."""
    if len(units) != len(logs):
        return 0.0
    groups: dict[int, list[float]] = {}
    for u, x in zip(units, logs):
        groups.setdefault(int(u), []).append(x)
    groups = {u: g for u, g in groups.items() if len(g) >= 4}
    k = len(groups)
    if k < 2:
        return 0.0
    meds = np.array([np.median(g) for g in groups.values()])
    # IQR / 1.349 is sigma for normal data; (pi/2) sigma^2 / n the variance of a median of n.
    within = float(
        np.mean(
            [
                (math.pi / 2) * (float(np.subtract(*np.percentile(g, [75, 25]))) / 1.349) ** 2 / len(g)
                for g in groups.values()
            ]
        )
    )
    between = max(0.0, float(np.var(meds, ddof=1)) - within)
    # z, not t on k - 1 degrees of freedom: t(0.99, 1) = 31.8 made two pairings' interval 0.22-7.1
    # around a 25% slowdown shown at p = 5e-12, and t on three did not stop the A/A "faster"
    # verdicts it was tried against (those gates' pairings agreed: reports/gate/).
    return NormalDist().inv_cdf(1 - level) * math.sqrt(between / k)


def describe(word: str, ratio: float, lo: float, hi: float, confidence: float) -> str:
    """'slower, ratio 1.077 (98% CI 1.012-1.150)': the word with its ratio and interval."""
    hi_txt = "inf" if math.isinf(hi) else f"{hi:.3f}"
    return f"{word}, ratio {ratio:.3f} ({confidence:.0%} CI {lo:.3f}-{hi_txt})"


def advice(word: str) -> str:
    """What to do next, for the end of a verdict's line ('' when the word is decided)."""
    return f" -> {UNDECIDED}: {UNDECIDED_ADVICE}" if word == UNDECIDED else ""


def exit_code(words: Sequence[str]) -> int:
    """1 when any is slower, EXIT_UNDECIDED when none is but one could not tell, else 0."""
    if SLOWER in words:
        return 1
    return EXIT_UNDECIDED if UNDECIDED in words else 0
