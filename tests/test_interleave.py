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
    with pytest.raises(ValueError, match="exactly one"):
        interleaved_blocks(a, b, FakeClock(step_s=1.0), 1)
