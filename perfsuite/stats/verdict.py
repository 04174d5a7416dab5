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
from typing import Any

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


# A pairing (A's j-th side process against B's j-th) counts as a unit of the interval with at
# least this many pairs: its median must be an estimate, not one pair.
MIN_UNIT_PAIRS = 4


# Hodges-Lehmann over at most this many values (a pairing's pairs): its Walsh averages number
# n (n + 1) / 2, 2 million here; a longer pairing is thinned evenly first.
_HL_MAX = 2000


def hodges_lehmann(xs: Sequence[float]) -> float:
    """The median of the Walsh averages (x_i + x_j) / 2, i <= j: the estimate that goes with the
    signed-rank test, nearly as efficient as the mean on normal noise (95%, the median's 64%) and
    as robust as the median to a burst of slow pairs."""
    x = np.asarray(xs, dtype=float)
    if x.size > _HL_MAX:
        x = x[np.linspace(0, x.size - 1, _HL_MAX).astype(int)]
    i, j = np.triu_indices(x.size)
    return float(np.median((x[i] + x[j]) / 2))


def unit_centres(logs: Sequence[float], units: Sequence[int]) -> list[float]:
    """The Hodges-Lehmann centre of each pairing's log ratios (pairings with at least
    MIN_UNIT_PAIRS pairs), by pairing."""
    if len(units) != len(logs):
        return []
    groups: dict[int, list[float]] = {}
    for u, x in zip(units, logs):
        groups.setdefault(int(u), []).append(float(x))
    return [hodges_lehmann(g) for _, g in sorted(groups.items()) if len(g) >= MIN_UNIT_PAIRS]


def pairings(logs: Sequence[float], units: Sequence[int]) -> tuple[float, float, int] | None:
    """(mean of the pairings' centres (unit_centres), its standard error, how many): the estimate
    whose error counts each pairing once. None with fewer than two pairings.

    Pairs are not independent: every pair of one pairing shares its two processes' memory layout,
    placement and moment of the machine's load, a few percent here, so the spread of pairs
    inside pairings says nothing about how far another set of processes would land. Each side
    process draws its own layout (perfsuite.compare.side_worker.shifted_layout), so the pairings
    are independent draws, and their centres' spread is the whole error: within-pairing noise
    and what the processes share alike. Across rounds of fresh processes a unit is a whole round
    (perfsuite.compare.paired_gate.pooled): under load a round's processes share the load's moment. Issue 49: with every process of a side forked with one
    layout, a change that only moved allocations read "faster, 0.970 (0.965-0.979)" in one gate,
    its three pairings 0.970 / 0.977 / 0.966, and 1.001 in the next."""
    meds = unit_centres(logs, units)
    k = len(meds)
    if k < 2:
        return None
    return float(np.mean(meds)), float(np.std(meds, ddof=1)) / math.sqrt(k), k


def _t(k: int) -> Any:
    """Student's t with k - 1 degrees of freedom (scipy's frozen distribution)."""
    from scipy.stats import t

    return t(k - 1)


def p_greater(logs: Sequence[float], centre: float, units: Sequence[int] = ()) -> float:
    """One-sided p of "the log ratios are centred above `centre`": the larger of the pairs'
    signed-rank p and, with pairings, Student's t on the pairings' centres with k - 1 degrees of
    freedom. Below `level` exactly when log_interval's lower end lies above `centre`."""
    p = signed_rank_greater(logs, centre)
    c = pairings(logs, units)
    if c is not None:
        mean, se, k = c
        tp = float(_t(k).sf((mean - centre) / se)) if se > 0 else (0.0 if mean > centre else 1.0)
        p = max(p, tp)
    return p


def log_interval(logs: Sequence[float], level: float, units: Sequence[int] = ()) -> tuple[float, float]:
    """The interval of the centre of the log ratios, each end one-sided at `level`: the pairs'
    signed-rank interval, and with pairings also the t interval of their centres (k - 1 degrees
    of freedom), whichever reaches further at each end (p_greater is its test)."""
    lo, hi = signed_rank_interval(logs, level)
    c = pairings(logs, units)
    if c is not None:
        mean, se, k = c
        q = float(_t(k).ppf(1 - level)) * se
        lo, hi = min(lo, mean - q), max(hi, mean + q)
    return lo, hi


def log_estimate(logs: Sequence[float], units: Sequence[int] = ()) -> float:
    """The estimate that goes with log_interval: the mean of the pairings' centres, or without
    pairings the pairs' Hodges-Lehmann centre (their signed-rank interval at level 1/2). It lies
    inside the interval at any level below 1/2, so a printed ratio never falls outside its own
    interval (issue 49: "faster 0.919 (0.741-0.912)" printed the pairs' median beside it)."""
    c = pairings(logs, units)
    if c is not None:
        return c[0]
    if not logs:
        return math.nan
    lo, hi = signed_rank_interval(logs, 0.5)
    return (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else float(np.median(logs))


def ratio_interval(ratios: Sequence[float], level: float, units: Sequence[int] = ()) -> tuple[float, float]:
    """log_interval of the pairs' ratios, as ratios (0 and inf for unbounded ends)."""
    lo, hi = log_interval([math.log(r) for r in ratios], level, units)
    return (math.exp(lo) if lo > -math.inf else 0.0, math.exp(hi) if hi < math.inf else math.inf)


def ratio_estimate(ratios: Sequence[float], units: Sequence[int] = ()) -> float:
    """log_estimate of the pairs' ratios, as a ratio."""
    return math.exp(log_estimate([math.log(r) for r in ratios], units)) if ratios else math.nan


def describe(word: str, ratio: float, lo: float, hi: float, confidence: float) -> str:
    """'slower, ratio 1.077 (98% CI 1.012-1.150)': the word with its ratio and interval."""
    hi_txt = "inf" if math.isinf(hi) else f"{hi:.3f}"
    return f"{word}, ratio {ratio:.3f} ({confidence:.0%} CI {lo:.3f}-{hi_txt})"


def advice(word: str) -> str:
    """What to do next, for the end of a verdict's line ('' when the word is decided)."""
    return f" -> {UNDECIDED}: {UNDECIDED_ADVICE}" if word == UNDECIDED else ""


# What a CI job asks an undecided case to end in (`perfsuite gate --undecided`): report it
# (EXIT_UNDECIDED), let it pass (0: only a confirmed slowdown fails the job) or fail it (1).
UNDECIDED_EXITS = ("report", "pass", "fail")


def exit_code(words: Sequence[str], undecided: str = "report") -> int:
    """1 when any is slower, else for an undecided one what `undecided` says (report:
    EXIT_UNDECIDED, pass: 0, fail: 1), else 0."""
    if undecided not in UNDECIDED_EXITS:
        raise ValueError(f"undecided must be one of {', '.join(UNDECIDED_EXITS)}, got {undecided!r}")
    if SLOWER in words:
        return 1
    if UNDECIDED in words:
        return {"report": EXIT_UNDECIDED, "pass": 0, "fail": 1}[undecided]
    return 0
