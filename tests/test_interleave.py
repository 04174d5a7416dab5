import pytest
from fakeclock import FakeClock

from perfsuite.measuring.interleave import interleaved_blocks


class OrderClock(FakeClock):
    def __init__(self):
        super().__init__(step_s=0.01)
        self.order = []

    def time_block(self, fn, n):
        self.order.append(fn.__name__)
        return super().time_block(fn, n)


def a():
    pass


def b():
    pass


def test_pairs_alternate_order_and_count():
    clock = OrderClock()
    ta, tb = interleaved_blocks(a, b, clock, 2, pairs=4)
    assert clock.order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert len(ta) == len(tb) == 4 and ta[0] == pytest.approx(0.01)


def test_budget_with_a_minimum_of_pairs():
    ta, _ = interleaved_blocks(a, b, FakeClock(step_s=1.0), 1, budget_s=0.5)
    assert len(ta) == 6
    with pytest.raises(ValueError, match="pairs, budget_s or both"):
        interleaved_blocks(a, b, FakeClock(step_s=1.0), 1)


def test_pairs_capped_by_the_budget():
    """Both given (an amp entry's pairs within its max_time): whichever ends first, at least
    min_pairs; each pair costs 2 s on this clock."""
    ta, _ = interleaved_blocks(a, b, FakeClock(step_s=1.0), 1, pairs=20, budget_s=7.0, min_pairs=2)
    assert len(ta) == 4
    ta, _ = interleaved_blocks(a, b, FakeClock(step_s=1.0), 1, pairs=3, budget_s=100.0, min_pairs=2)
    assert len(ta) == 3
    ta, _ = interleaved_blocks(a, b, FakeClock(step_s=1.0), 1, pairs=20, budget_s=0.0, min_pairs=2)
    assert len(ta) == 2


class _WarmRepeatClock:
    """A step that runs `bonus` faster when its block follows a block of the same callable (its
    caches and its process still warm), as two side processes of one code do on a short step."""

    def __init__(self, step_s: float = 1e-3, bonus: float = 0.08) -> None:
        self.step_s, self.bonus, self.t, self.last = step_s, bonus, 0.0, None

    def time_block(self, fn, n: int) -> float:
        s = n * self.step_s * ((1 - self.bonus) if fn is self.last else 1.0)
        self.last, self.t = fn, self.t + s
        return s

    def now(self) -> float:
        return self.t


def test_the_gates_rotation_gives_neither_side_the_warm_repeats():
    """The gate times two pairs per build (A B B A) and moves to the next builds: B alone followed
    itself, and two builds of the same code read B 4% faster. Alternating the first side of each
    call gives both sides the warm turn equally: the unchanged step is the same."""
    import statistics

    from perfsuite.compare.paired_gate import paired_ratios

    def noop_factory():
        return lambda: None

    a, b = [noop_factory() for _ in range(3)], [noop_factory() for _ in range(3)]
    run = paired_ratios(a, b, _WarmRepeatClock(), budget_s=2.0)
    assert statistics.median(run.ratios) == pytest.approx(1.0, abs=1e-9)
    assert statistics.geometric_mean(run.ratios) == pytest.approx(1.0, abs=1e-9)


def test_each_pairing_of_builds_gets_both_orders_so_the_warm_turn_does_not_widen_the_interval():
    """With an even number of builds, alternating the first side by block alone gave pairing 0
    A B B A every time and pairing 1 B A A B: the warm turn read as a difference between
    pairings (0.96 against 1.04 here), and the interval, which widens by that difference, could
    not exclude 1 at a real +3% step (history's rechecks, 2026-11-28). Each pairing alternates
    on its own visits: every pairing's median is the step's, and nothing is added to the interval."""
    import statistics

    from perfsuite.compare.paired_gate import paired_ratios
    from perfsuite.stats.verdict import ratio_interval

    for k in (2, 3, 4):
        a, b = [(lambda: None) for _ in range(k)], [(lambda: None) for _ in range(k)]
        run = paired_ratios(a, b, _WarmRepeatClock(), budget_s=2.0)
        by_pairing: dict[int, list[float]] = {}
        for u, r in zip(run.units, run.ratios):
            by_pairing.setdefault(u, []).append(r)
        assert len(by_pairing) == k
        assert all(statistics.median(rs) == pytest.approx(1.0, abs=1e-9) for rs in by_pairing.values()), k
        assert ratio_interval(run.ratios, 0.01, run.units) == pytest.approx(ratio_interval(run.ratios, 0.01)), k
