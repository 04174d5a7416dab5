import math

import numpy as np
import pytest

from perfsuite import stats
from perfsuite.gate import GateCase, noise_floor, paired_ratios, run_gate, wilson_interval


class Work:
    """A fake step with a cost; the drifting clock below charges it."""

    def __init__(self, cost):
        self.cost = cost

    def __call__(self):
        return None


class DriftingClock:
    """Time advances by each block's cost x (1 + noise) x a slow +-15% drift: what separate
    processes suffer from, and what interleaving must cancel."""

    method = "fake"

    def __init__(self, noise=0.04, drift=0.15, period_s=5.0, seed=0):
        self.t, self.noise, self.drift, self.period = 0.0, noise, drift, period_s
        self.rng = np.random.default_rng(seed)

    def time_block(self, fn, n):
        factor = 1 + self.drift * math.sin(2 * math.pi * self.t / self.period)
        dt = fn.cost * n * factor * max(0.1, 1 + self.rng.normal(0, self.noise))
        self.t += dt
        return dt

    def now(self):
        return self.t


def test_three_percent_is_caught_despite_drift():
    caught = 0
    for seed in range(10):
        (v,) = run_gate([GateCase("c", Work(0.04), Work(0.04 * 1.03))], DriftingClock(seed=seed), budget_s=15)
        caught += v.slower
    assert caught >= 9


def test_unchanged_code_is_rarely_flagged():
    flagged = sum(run_gate([GateCase("c", Work(0.04), Work(0.04))], DriftingClock(seed=s), budget_s=15)[0].slower
                  for s in range(40))
    assert flagged <= 1


def test_threshold_and_floor_raise_the_bar():
    clock = DriftingClock(seed=1)
    (v,) = run_gate([GateCase("c", Work(0.04), Work(0.04 * 1.03), floor=0.05)], clock, budget_s=15)
    assert v.threshold == 0.05 and not v.slower
    (v,) = run_gate([GateCase("c", Work(0.04), Work(0.04 * 1.10))], clock, threshold=0.05, budget_s=15)
    assert v.slower


def test_benjamini_hochberg_across_cases():
    # m = 8, q = .05: cut-offs .00625, .0125, .01875, ...; only the two smallest pass.
    ps = [0.041, 0.001, 0.039, 0.008, 0.042, 0.06, 0.074, 0.205]
    assert stats.benjamini_hochberg(ps) == [False, True, False, True, False, False, False, False]
    # Step-up: a p above its own cut-off is rejected when a larger rank passes.
    assert stats.benjamini_hochberg([0.03, 0.04]) == [True, True]
    assert stats.benjamini_hochberg([0.04, 0.9, 0.8]) == [False, False, False]  # 0.04 > 0.05/3
    assert stats.benjamini_hochberg([]) == []


def test_sign_test_exact_values():
    assert stats.sign_test_greater([2, 2, 2], 1) == pytest.approx(1 / 8)
    assert stats.sign_test_greater([2, 0, 2, 2], 1) == pytest.approx(5 / 16)
    assert stats.sign_test_greater([1, 1], 1) == 1.0


def test_paired_ratios_cancel_drift():
    clock = DriftingClock(noise=0.0, drift=0.3, seed=2)
    run = paired_ratios(Work(0.01), Work(0.0105), clock, budget_s=20)
    assert run.median == pytest.approx(1.05, abs=0.01)


def test_noise_floor_of_identical_builds_is_small():
    floor = noise_floor(lambda: Work(0.02), DriftingClock(seed=3), runs=3, budget_s=5)
    assert 0 <= floor < 0.02


def test_wilson_interval():
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and 0.65 < lo < 0.75


def test_workload_at_a_revision_builds_beside_the_current_one():
    import subprocess

    from perfsuite import registry
    from perfsuite.errors import ConfigError
    from perfsuite.gate_versions import workload_at

    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if root.returncode != 0:
        pytest.skip("not inside the git repository")
    old = workload_at("HEAD", "matmul", root.stdout.strip())
    assert old is not registry.get("matmul") and old.name == "matmul"
    built = old.build({"n": 16}, "cpu")
    built.fn()
    assert registry.get("matmul").name == "matmul"  # the registry was not disturbed
    with pytest.raises(ConfigError, match="cannot read"):
        workload_at("no-such-revision", "matmul", root.stdout.strip())
