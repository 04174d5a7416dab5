import math

import numpy as np
import pytest

from perfsuite.stats import summary as stats


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


# ---- several processes (stats.process_spread) -----------------------------------------------


def _groups(medians, n=40, sigma=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return [list(m * rng.lognormal(0.0, sigma, size=n)) for m in medians]


def test_process_spread_splits_between_and_within_process_variance():
    # Processes 10% apart with 1% jitter inside each: nearly all of a median's variance is between.
    apart = stats.process_spread(_groups([1.0, 1.1, 0.9, 1.05, 0.95]))
    assert apart.between_share > 0.95 and apart.between_cv == pytest.approx(0.079, rel=0.1)
    # Processes alike: what spread there is comes from sampling inside each one.
    # Averaged over seeds: one draw of 5 variances is itself noisy.
    alike = [stats.process_spread(_groups([1.0] * 5, sigma=0.05, n=20, seed=s)) for s in range(20)]
    assert np.mean([a.between_share for a in alike]) < 0.3
    assert np.mean([a.within_cv for a in alike]) == pytest.approx(0.05 * 1.2533 / 20**0.5, rel=0.2)


def test_process_spread_reports_the_median_of_process_medians():
    # One slow process (as the 320 us one among ~173 us in the peers run) barely moves the median.
    s = stats.process_spread(_groups([173e-6, 175e-6, 320e-6, 171e-6, 174e-6]))
    assert s.median == pytest.approx(174e-6, rel=0.01)
    assert s.ci_high > 230e-6  # ... but it widens the interval: the spread is real


@pytest.mark.parametrize(
    "n, method", [(2, "t interval"), (3, "t interval"), (5, "t interval"), (7, "order statistics")]
)
def test_process_spread_interval_method_by_count(n, method):
    meds = [1.0 + 0.01 * i for i in range(n)]
    s = stats.process_spread(_groups(meds, n=30, sigma=0.001))
    assert method in s.ci_method
    assert s.ci_low <= s.median <= s.ci_high
    if n == 2:  # widened to hold both process medians
        assert s.ci_low <= min(s.medians) and s.ci_high >= max(s.medians)


def test_process_spread_needs_two_processes():
    with pytest.raises(ValueError, match="at least 2"):
        stats.process_spread([[1.0, 2.0]])


def _log_ratio_test_by_hand(base, new, confidence=0.95):
    """The pooled two-sample t on logs as perfsuite wrote it out before it called scipy (issue 39):
    the oracle scipy.stats.ttest_ind(...).confidence_interval() must agree with."""
    import math

    import numpy as np
    from scipy.stats import t as student_t

    lb, ln = np.log(np.asarray(base, dtype=float)), np.log(np.asarray(new, dtype=float))
    diff, df = float(ln.mean() - lb.mean()), lb.size + ln.size - 2
    pooled = (float(lb.var(ddof=1)) * (lb.size - 1) + float(ln.var(ddof=1)) * (ln.size - 1)) / df
    se = math.sqrt(pooled * (1 / lb.size + 1 / ln.size))
    half = float(student_t.ppf((1 + confidence) / 2, df)) * se
    return math.exp(diff), (math.exp(diff - half), math.exp(diff + half)), float(2 * student_t.sf(abs(diff) / se, df))


@pytest.mark.parametrize(
    "seed, sizes, shift, confidence",
    [(0, (3, 3), 0.0, 0.95), (1, (3, 5), 0.05, 0.95), (2, (2, 2), -0.1, 0.9), (3, (6, 4), 0.25, 0.99)],
)
def test_log_ratio_test_is_scipys_t_test_on_the_logs_and_agrees_with_the_hand_written_one(
    seed, sizes, shift, confidence
):
    import numpy as np

    rng = np.random.default_rng(seed)
    base = list(1e-3 * rng.lognormal(0.0, 0.03, sizes[0]))
    new = list(1e-3 * rng.lognormal(shift, 0.03, sizes[1]))
    ratio, (lo, hi), p = stats.log_ratio_test(base, new, confidence)
    want_ratio, (want_lo, want_hi), want_p = _log_ratio_test_by_hand(base, new, confidence)
    assert ratio == pytest.approx(want_ratio, rel=1e-12)
    assert (lo, hi) == (pytest.approx(want_lo, rel=1e-12), pytest.approx(want_hi, rel=1e-12))
    assert p == pytest.approx(want_p, rel=1e-9)


def test_log_ratio_test_of_units_without_spread():
    assert stats.log_ratio_test([1.0, 1.0], [1.0, 1.0]) == (1.0, (1.0, 1.0), 1.0)
    ratio, ci, p = stats.log_ratio_test([1.0, 1.0], [2.0, 2.0])
    assert ratio == pytest.approx(2.0) and ci == (pytest.approx(2.0), pytest.approx(2.0)) and p == 0.0
    with pytest.raises(ValueError, match="at least 2 units"):
        stats.log_ratio_test([1.0], [1.0, 2.0])


def test_the_ratio_bootstrap_of_a_million_samples_stays_small():
    """Issue 51: comparing a results file of a million samples resampled 2000 x 10^6 values at once
    (~15 GiB). Chunks and a 20,000-sample subsample bound it; the interval still holds the truth."""
    import tracemalloc

    import numpy as np

    from perfsuite.stats.summary import bootstrap_ratio_ci

    rng = np.random.default_rng(5)
    base, new = rng.random(1_000_000) + 1.0, rng.random(1_000_000) + 1.05  # medians 1.5 and 1.55
    tracemalloc.start()
    try:
        lo, hi = bootstrap_ratio_ci(base, new)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lo < 1.55 / 1.5 < hi and hi - lo < 0.03
    assert peak < 400 * 2**20
