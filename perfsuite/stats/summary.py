"""Statistics on lists of floats: summaries, the median's confidence interval, comparisons.

Pure functions, no torch. Order statistics are used for the median's interval because step
times are skewed (a few slow outliers from GC, page faults, other tenants): a normal-theory
interval would be pulled by them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np


def _checked(xs: Sequence[float], what: str = "samples") -> list[float]:
    if len(xs) == 0:
        raise ValueError(f"{what}: need at least one value")
    out = [float(x) for x in xs]
    if any(not math.isfinite(x) for x in out):
        raise ValueError(f"{what}: values must be finite")
    return out


def percentile(xs: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) with linear interpolation between order statistics."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    return float(np.percentile(_checked(xs), q))


def median(xs: Sequence[float]) -> float:
    """The one median of perfsuite (the mean of the two middle values for an even count)."""
    return float(np.median(_checked(xs)))


def iqr(xs: Sequence[float]) -> float:
    q1, q3 = np.percentile(_checked(xs), [25.0, 75.0])
    return float(q3 - q1)


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the distribution-free confidence interval of the median.

    The interval [x_(lo), x_(hi)] of the sorted sample covers the true median with probability
    >= `confidence`: the number of samples below the median is Binomial(n, 1/2), and
    scipy's quantile test inverts it. None when n is too small for any such interval (n < 6 at 95%).
    """
    if n < 1:
        return None
    from scipy.stats import quantile_test

    # The test's interval on the ranks 0..n-1 themselves is the pair of order statistics.
    ci = quantile_test(np.arange(n, dtype=float), q=0.0, p=0.5).confidence_interval(confidence)
    if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
        return None
    return int(ci.low), int(ci.high)


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free confidence interval of the median, or None if too few samples."""
    s = sorted(_checked(xs))
    ranks = median_ci_ranks(len(s), confidence)
    if ranks is None:
        return None
    return s[ranks[0]], s[ranks[1]]


def relative_ci_halfwidth(xs: Sequence[float], confidence: float = 0.95) -> float:
    """Half the width of the median's CI divided by the median; inf when undefined."""
    ci = median_ci(xs, confidence)
    m = median(xs)
    if ci is None or m <= 0:
        return math.inf
    return (ci[1] - ci[0]) / 2.0 / m


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    iqr: float
    p10: float
    p90: float
    p99: float
    ci_low: float | None
    ci_high: float | None
    confidence: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(xs: Sequence[float], confidence: float = 0.95) -> Summary:
    vals = _checked(xs)
    n = len(vals)
    ci = median_ci(vals, confidence)
    return Summary(
        n=n,
        median=median(vals),
        mean=float(np.mean(vals)),
        stdev=float(np.std(vals, ddof=1)) if n > 1 else 0.0,
        min=min(vals),
        max=max(vals),
        iqr=iqr(vals),
        p10=percentile(vals, 10),
        p90=percentile(vals, 90),
        p99=percentile(vals, 99),
        ci_low=None if ci is None else ci[0],
        ci_high=None if ci is None else ci[1],
        confidence=confidence,
    )


BOOTSTRAP_CHUNK = 4_000_000  # values resampled at once: 32 MB of float64
# Samples a side is bootstrapped from at most: past it a seeded subsample without replacement (the
# interval is then a little wider than the whole sample's, never narrower), so a million samples
# cost seconds, not minutes.
BOOTSTRAP_MAX_N = 20_000


def _bootstrap_medians(rng: np.random.Generator, x: np.ndarray, resamples: int) -> np.ndarray:
    if x.size > BOOTSTRAP_MAX_N:
        x = rng.choice(x, size=BOOTSTRAP_MAX_N, replace=False)
    rows = max(1, BOOTSTRAP_CHUNK // max(x.size, 1))
    out = [
        np.median(rng.choice(x, size=(min(rows, resamples - i), x.size), replace=True), axis=1)
        for i in range(0, resamples, rows)
    ]
    return np.concatenate(out)


def bootstrap_ratio_ci(
    base: Sequence[float],
    new: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(new) / median(base), resampled in chunks of at most
    BOOTSTRAP_CHUNK values: a record of a million samples took 2000 x 10^6 draws at once, ~15 GiB
    (issue 51)."""
    b = np.asarray(_checked(base, "base"))
    w = np.asarray(_checked(new, "new"))
    rng = np.random.default_rng(seed)
    mb, mw = _bootstrap_medians(rng, b, resamples), _bootstrap_medians(rng, w, resamples)
    ratios = mw / mb
    alpha = 1 - confidence
    return float(np.quantile(ratios, alpha / 2)), float(np.quantile(ratios, 1 - alpha / 2))


def mann_whitney_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value: do the two samples come from one distribution?"""
    from scipy.stats import mannwhitneyu

    b = _checked(base, "base")
    w = _checked(new, "new")
    if len(set(b) | set(w)) == 1:
        return 1.0  # all equal: no evidence of a difference (scipy would warn)
    return float(mannwhitneyu(w, b, alternative="two-sided").pvalue)


def benjamini_hochberg(pvalues: Sequence[float], q: float = 0.05) -> list[bool]:
    """Which hypotheses are rejected at false-discovery rate `q` (Benjamini-Hochberg step-up)."""
    if len(pvalues) == 0:
        return []
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    from scipy.stats import false_discovery_control

    return [bool(a <= q) for a in false_discovery_control(np.asarray(pvalues, dtype=float), method="bh")]


def signed_rank_greater(xs: Sequence[float], above: float) -> float:
    """One-sided Wilcoxon signed-rank p-value for 'xs are centred above `above`'.

    Far more powerful than the sign test on roughly symmetric data (95% of the t-test's
    efficiency, against the sign test's 64%), and still free of any normality assumption."""
    from scipy.stats import wilcoxon

    diffs = [x - above for x in _checked(xs)]
    if all(d == 0 for d in diffs):
        return 1.0
    # With tied |differences| scipy's "auto" runs a permutation test: 0.36 s a call for 12 pairs
    # (scipy 1.17), and an interval's end is found in 36 calls. The normal approximation with its
    # tie correction is the textbook answer there; without ties "auto" stays exact for small n.
    absolute = [abs(d) for d in diffs if d != 0]
    method = "approx" if len(set(absolute)) < len(absolute) else "auto"
    return float(wilcoxon(diffs, alternative="greater", zero_method="wilcox", method=method).pvalue)


@dataclass(frozen=True)
class ProcessSpread:
    """A case measured in several processes: the reported median and its interval, and how much
    of the spread of a process's median comes from the process it ran in.

    Variance components of one process's median m_i: Var(m_i) = between + within_i, where
    within_i = (pi/2) sigma_i^2 / n_i is the sampling variance of a median of n_i samples
    (sigma_i from the IQR, robust to outliers) and `between` is what differs from process to
    process (placement, memory layout, neighbours) and no amount of samples inside one removes."""

    medians: tuple[float, ...]
    median: float  # the median of the process medians: one slow process cannot move it far
    ci_low: float
    ci_high: float
    ci_method: str
    between_var: float  # variance of a process median that is between processes
    within_var: float  # mean sampling variance of one process's median
    confidence: float = 0.95

    @property
    def between_share(self) -> float:
        """Fraction of a process median's variance that is between processes (0..1)."""
        total = self.between_var + self.within_var
        return self.between_var / total if total > 0 else 0.0

    @property
    def between_cv(self) -> float:
        return math.sqrt(self.between_var) / self.median

    @property
    def within_cv(self) -> float:
        return math.sqrt(self.within_var) / self.median

    @property
    def rel_ci_halfwidth(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0 / self.median

    def to_dict(self) -> dict[str, Any]:
        return {
            "medians": list(self.medians),
            "median": self.median,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "ci_method": self.ci_method,
            "between_var": self.between_var,
            "within_var": self.within_var,
            "between_share": self.between_share,
            "between_cv": self.between_cv,
            "within_cv": self.within_cv,
            "confidence": self.confidence,
        }


def process_spread(
    groups: Sequence[Sequence[float]],
    confidence: float = 0.95,
    unit: str = "process",
    medians: Sequence[float] | None = None,
) -> ProcessSpread:
    """Summary of a case measured in len(groups) >= 2 processes, one sample list per process
    (or, with `unit="build"`, in several builds of the step rotated inside one process: the same
    variance components, one level down). `medians`, when given, are the units' own medians (a
    process measured in several builds reports the median of theirs), else each group's.

    The interval: with 6 or more processes (8 at 99%), the distribution-free interval of the median
    of the process medians; with fewer, the t interval of the process medians' logs (median x/÷
    exp(t s/sqrt(N)), N - 1 degrees of freedom; too few for an order-statistic interval). Two
    units give a very wide interval (t = 12.7 at 95%): two draws bracket the median only half of
    the time, and nothing narrower is honest."""
    from scipy.stats import t as student_t

    if len(groups) < 2:
        raise ValueError(f"process_spread needs at least 2 groups (one per {unit}), got {len(groups)}")
    vals = [_checked(g, f"{unit} {i}") for i, g in enumerate(groups)]
    if medians is not None and len(medians) != len(vals):
        raise ValueError(f"process_spread: {len(medians)} medians for {len(vals)} groups")
    meds = [median(g) for g in vals] if medians is None else _checked(medians, f"{unit} medians")
    n = len(meds)
    point = median(meds)
    var_meds = float(np.var(meds, ddof=1))
    # IQR / 1.349 is sigma for normal data; (pi/2) sigma^2 / k is the variance of a median of k.
    within = sum((math.pi / 2) * (iqr(g) / 1.349) ** 2 / len(g) for g in vals) / n
    between = max(0.0, var_meds - within)
    ci = median_ci(meds, confidence) if n >= 6 else None  # None: too few for this confidence (n < 8 at 99%)
    if ci is not None:
        lo, hi = ci
        method = f"order statistics of the {unit} medians"
    else:
        # On logs, around the median: times are positive and skewed (one process 10x slower when
        # its threads were descheduled), and a ratio is what a comparison reads.
        logs = np.log(np.asarray(meds, dtype=float))
        half = float(student_t.ppf((1 + confidence) / 2, n - 1)) * float(np.std(logs, ddof=1)) / math.sqrt(n)
        lo, hi = point * math.exp(-half), point * math.exp(half)
        method = f"t interval of the {unit} medians (on logs)"
    return ProcessSpread(tuple(meds), point, max(lo, 0.0), hi, method, between, within, confidence)


MIN_RUNS_FOR_DRIFT = 3  # separate runs before their spread is taken as the drift between runs


def drift_halfwidth(values: Sequence[float]) -> float:
    """Where one more of `values` (separate runs' medians) lands, as a relative 95% half-width:
    t(0.975, K-1) SDs of their K logs (the t quantile widens it for a few values' uncertain SD).
    The drift between runs that stats.widened adds and compare's noise band counts."""
    from scipy.stats import t

    logs = np.log(np.asarray(_checked(values, "medians"), dtype=float))
    if len(logs) < 2:
        raise ValueError("the drift between runs needs at least 2 of them")
    return math.expm1(float(t.ppf(0.975, len(logs) - 1)) * float(np.std(logs, ddof=1)))


def widened(centre: float, lo: float, hi: float, drift: float) -> tuple[float, float]:
    """An interval [lo, hi] around `centre` with a relative `drift` (a 95% half-width, e.g. 0.01)
    added in quadrature on each side, on logs: what a run cannot see in itself (the machine's state
    minutes later) added to what it can (its own processes' spread)."""
    if drift <= 0 or centre <= 0:
        return lo, hi
    d = math.log1p(drift)
    below = math.log(centre / lo) if lo > 0 else math.inf
    above = math.log(hi / centre)
    return centre * math.exp(-math.hypot(below, d)), centre * math.exp(math.hypot(above, d))


def log_ratio_test(
    base: Sequence[float], new: Sequence[float], confidence: float = 0.95
) -> tuple[float, tuple[float, float], float]:
    """Student's two-sample t on the logs of two small sets of independent units (build or process
    medians): (ratio of their geometric means new/base, its `confidence` interval, two-sided p).
    Logs, so that a slowdown and the matching speed-up are symmetric. The variance is pooled: under
    the null hypothesis (unchanged code, one machine) both sides' units spread alike, and with
    three units a side Welch's degrees of freedom (down to 2) would leave no power for any change."""
    from scipy.stats import ttest_ind

    lb = np.log(np.asarray(_checked(base, "base"), dtype=float))
    ln = np.log(np.asarray(_checked(new, "new"), dtype=float))
    if lb.size < 2 or ln.size < 2:
        raise ValueError(f"log_ratio_test needs at least 2 units a side, got {lb.size} and {ln.size}")
    diff = float(ln.mean() - lb.mean())
    if np.ptp(lb) == 0 and np.ptp(ln) == 0:  # no spread at all: scipy's t is undefined (0/0)
        return math.exp(diff), (math.exp(diff), math.exp(diff)), 1.0 if diff == 0.0 else 0.0
    t = ttest_ind(ln, lb, equal_var=True)
    ci = t.confidence_interval(confidence)
    return math.exp(diff), (math.exp(float(ci.low)), math.exp(float(ci.high))), float(t.pvalue)
