"""A group-sequential one-sided test: read the evidence at a few looks, stop as soon as it is clear.

The gate used to spend half its budget on a first test and the other half on a confirmation
run; only pairs from one half ever entered a test. A sequential test reads all the pairs
gathered so far at each look, and the false-alarm rate stays at `alpha` overall because each
look may only spend part of it: Lan-DeMets alpha spending with O'Brien-Fleming's shape, which
spends almost nothing early (a look at half the budget rejects only at p < 0.0003 for
alpha = 0.01) and keeps nearly all of alpha for the last look.

The boundaries are exact for the joint normal law of the look statistics (the statistic at
information t_i and t_j is correlated sqrt(t_i / t_j)): the last look may then reject at its
full remaining share, p < 0.0091 for alpha = 0.01, where the Bonferroni bound used until
issue 16's second pass allowed only p < 0.0071 and cost power at the look that decides most
gates.

Futility: a look also stops, saying "not slower", when the pairs show with FUTILITY_CONFIDENCE
that the change is *below* the threshold. (The first version stopped whenever the estimate sat
below the threshold; at half of a 15 s budget the estimate of a 2.7% slowdown is that uncertain
on this machine, and 2 of 5 misses in the quiet self-check were such early stops.) Futility is
non-binding: the boundaries ignore it, so stopping for it only lowers the false-alarm rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

LOOKS = (0.5, 0.75, 1.0)  # fractions of the pairs' time at which the test is read
SLOWER, NOT_SLOWER = "slower", "not slower"
# Stop early only when "centred below the threshold" is this clear (one-sided p < 1 - this): a
# slowdown well above the threshold is almost never stopped by mistake, and an unchanged step
# whose estimate sits clearly below the threshold still frees the rest of the budget.
FUTILITY_CONFIDENCE = 0.90


def obf_spent(t: float, alpha: float) -> float:
    """Alpha spent by information fraction t (0 < t <= 1): 2 (1 - Phi(z_{1-alpha/2} / sqrt(t)))."""
    if not 0 < t <= 1:
        raise ValueError(f"information fraction must be in (0, 1], got {t}")
    from scipy.special import ndtr, ndtri

    # scipy's tails, not NormalDist's: its cdf(-8.6) is 1 + erf(...) rounded to 0, which made a
    # gate at --fdr 1e-9 fail after measuring ("p must be in the range 0.0 < p < 1.0").
    z = -float(ndtri(alpha / 2))
    return 2 * float(ndtr(-z / math.sqrt(t)))


def boundaries(looks: Sequence[float], alpha: float) -> list[float]:
    """Nominal one-sided p-value level of each look, such that the chance of crossing any of them
    under the null is exactly the O'Brien-Fleming alpha spent by then."""
    if not looks or list(looks) != sorted(looks) or looks[-1] != 1.0 or len(set(looks)) != len(looks):
        raise ValueError(f"looks must increase strictly to 1.0, got {list(looks)}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    z = _z_boundaries(tuple(float(t) for t in looks), float(alpha))
    from scipy.special import ndtr

    return [float(ndtr(-c)) for c in z]  # ndtr(-c), not 1 - ndtr(c): no underflow for early looks


@lru_cache(maxsize=64)
def _z_boundaries(looks: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Boundaries on the z scale by recursive numerical integration (Armitage, McPherson and
    Rowe): the sum statistic W(t) = Z sqrt(t) has independent normal increments, so the density
    of W on the paths that have not crossed yet is carried from look to look on a grid."""
    import numpy as np
    from scipy.optimize import brentq
    from scipy.special import ndtr, ndtri

    spent = [obf_spent(t, alpha) for t in looks]
    z = [-float(ndtri(spent[0]))]
    h = 0.005  # grid step in W; 0.002 moves the last boundary by ~1e-5 in p
    # Density of W(t_1) below the first boundary (far below -8 sd nothing is left to count).
    w = np.arange(-8.0 * math.sqrt(looks[-1]), z[0] * math.sqrt(looks[0]), h)
    dens = np.exp(-w * w / (2 * looks[0])) / math.sqrt(2 * math.pi * looks[0])
    for k in range(1, len(looks)):
        sd = math.sqrt(looks[k] - looks[k - 1])
        target = spent[k] - spent[k - 1]

        def crossed(c: float, w: Any = w, dens: Any = dens, sd: float = sd, t: float = looks[k]) -> float:
            # P(not crossed before, W(t_k) >= c sqrt(t_k))
            return float(np.sum(dens * ndtr((w - c * math.sqrt(t)) / sd)) * h)

        z.append(brentq(lambda c: crossed(c) - target, -60.0, 60.0, xtol=1e-10))  # noqa: B023 - brentq calls it within this iteration
        if k + 1 < len(looks):
            new_w = np.arange(w[0], z[k] * math.sqrt(looks[k]), h)
            kernel = np.exp(-(((new_w[:, None] - w[None, :]) / sd) ** 2) / 2) / (sd * math.sqrt(2 * math.pi))
            w, dens = new_w, kernel @ dens * h
    return tuple(z)


def decide(p: float, boundary: float, p_below: float, final: bool) -> str | None:
    """One look: `slower` when p is under this look's boundary; `not slower` at the last look, or
    earlier when the pairs show the change is below the threshold (`p_below`, the one-sided p of
    'centred below the threshold', under 1 - FUTILITY_CONFIDENCE); else None: go on."""
    if p < boundary:
        return SLOWER
    if final or p_below < 1 - FUTILITY_CONFIDENCE:
        return NOT_SLOWER
    return None


def p_on_alpha_scale(p: float, boundary: float, alpha: float) -> float:
    """The look's p rescaled so that it is below `alpha` exactly when the look said slower: the
    value Benjamini-Hochberg compares across the cases of one gate."""
    return min(1.0, p * alpha / boundary)
