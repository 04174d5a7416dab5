"""A group-sequential one-sided test: read the evidence at a few looks, stop as soon as it is clear.

The gate used to spend half its budget on a first test and the other half on a confirmation
run; only pairs from one half ever entered a test. A sequential test reads all the pairs
gathered so far at each look, and the false-alarm rate stays at `alpha` overall because each
look may only spend part of it: Lan-DeMets alpha spending with O'Brien-Fleming's shape, which
spends almost nothing early (a look at half the budget rejects only at p < 0.0003 for
alpha = 0.01) and keeps nearly all of alpha for the last look. Each look's nominal level is the
increment of spent alpha, which is conservative (a Bonferroni bound on the looks; the exact
boundaries would need the joint law of the look statistics). Between looks the test also stops
for futility, when the estimate is not even above the threshold: that costs almost no power
against the effects the gate is sized for, and frees the rest of the budget.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

LOOKS = (0.5, 0.75, 1.0)  # fractions of the pairs' time at which the test is read
SLOWER, NOT_SLOWER = "slower", "not slower"


def obf_spent(t: float, alpha: float) -> float:
    """Alpha spent by information fraction t (0 < t <= 1): 2 (1 - Phi(z_{1-alpha/2} / sqrt(t)))."""
    if not 0 < t <= 1:
        raise ValueError(f"information fraction must be in (0, 1], got {t}")
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return 2 * (1 - NormalDist().cdf(z / math.sqrt(t)))


def boundaries(looks: Sequence[float], alpha: float) -> list[float]:
    """Nominal one-sided p-value level of each look: the alpha spent since the previous look."""
    if not looks or list(looks) != sorted(looks) or looks[-1] != 1.0:
        raise ValueError(f"looks must increase to 1.0, got {list(looks)}")
    spent = [obf_spent(t, alpha) for t in looks]
    return [s - (spent[i - 1] if i else 0.0) for i, s in enumerate(spent)]


def decide(p: float, boundary: float, above_threshold: bool, final: bool) -> str | None:
    """One look: `slower` when p is under this look's boundary; `not slower` at the last look,
    or earlier when the estimate is not above the threshold (futility); else None: go on."""
    if p < boundary:
        return SLOWER
    if final or not above_threshold:
        return NOT_SLOWER
    return None


def p_on_alpha_scale(p: float, boundary: float, alpha: float) -> float:
    """The look's p rescaled so that it is below `alpha` exactly when the look said slower: the
    value Benjamini-Hochberg compares across the cases of one gate."""
    return min(1.0, p * alpha / boundary)
