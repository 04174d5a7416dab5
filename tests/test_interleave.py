import pytest
from fakeclock import FakeClock

from perfsuite.measure.interleave import interleaved_blocks


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
