import math

import numpy as np
import pytest

from perfsuite import stats


def test_percentiles_interpolate_linearly():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert stats.median(xs) == 2.5
    assert stats.percentile(xs, 0) == 1.0
    assert stats.percentile(xs, 100) == 4.0
    assert stats.percentile(xs, 25) == 1.75
    assert stats.iqr(xs) == pytest.approx(3.25 - 1.75)
    # Same convention as numpy's default.
    rng = np.random.default_rng(0)
    ys = list(rng.normal(size=37))
    for q in (1, 10, 50, 90, 99):
        assert stats.percentile(ys, q) == pytest.approx(float(np.percentile(ys, q)))


@pytest.mark.parametrize(
    "n, ranks",
    # Classic tables of the distribution-free 95% interval of the median (1-based ranks - 1).
    [(5, None), (6, (0, 5)), (10, (1, 8)), (20, (5, 14)), (50, (17, 32)), (100, (39, 60))],
)
def test_median_ci_ranks_match_tables(n, ranks):
    assert stats.median_ci_ranks(n) == ranks


def test_median_ci_covers_true_median_about_95_percent():
    # Exponential: skewed like step times. True median = ln 2.
    rng = np.random.default_rng(1)
    hits = 0
    trials = 2000
    for _ in range(trials):
        lo, hi = stats.median_ci(list(rng.exponential(size=30)))
        hits += lo <= math.log(2) <= hi
    assert 0.94 <= hits / trials <= 0.995


def test_large_n_uses_normal_approximation_consistently():
    lo, hi = stats.median_ci_ranks(5000)
    assert lo < 2500 < hi
    assert (hi - lo) == pytest.approx(1.96 * math.sqrt(5000), abs=3)


def test_summary_exact_values():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert s.n == 6
    assert s.median == 3.5
    assert s.mean == 3.5
    assert s.stdev == pytest.approx(math.sqrt(3.5))
    assert (s.ci_low, s.ci_high) == (1.0, 6.0)
    assert s.p90 == pytest.approx(5.5)


def test_relative_ci_halfwidth_undefined_for_few_samples():
    assert stats.relative_ci_halfwidth([1.0, 1.1, 0.9]) == math.inf


def test_bad_samples_are_rejected():
    with pytest.raises(ValueError, match="at least one"):
        stats.median([])
    with pytest.raises(ValueError, match="finite"):
        stats.median([1.0, float("nan")])


def test_bootstrap_ratio_ci_brackets_a_known_shift():
    rng = np.random.default_rng(2)
    base = list(rng.lognormal(0.0, 0.05, size=200))
    new = [x * 1.10 for x in rng.lognormal(0.0, 0.05, size=200)]
    lo, hi = stats.bootstrap_ratio_ci(base, new)
    assert lo < 1.10 < hi
    assert lo > 1.05


def test_mann_whitney():
    rng = np.random.default_rng(3)
    a = list(rng.normal(10, 1, 100))
    b = list(rng.normal(10, 1, 100))
    c = list(rng.normal(11, 1, 100))
    assert stats.mann_whitney_p(a, b) > 0.01
    assert stats.mann_whitney_p(a, c) < 1e-6
    assert stats.mann_whitney_p([1.0] * 5, [1.0] * 5) == 1.0
