"""Bisect's good revision keeps its side processes across probes (perfsuite.compare.sides.SidePool);
start_all starts the rest together. Fake sides: no process is started here."""

from __future__ import annotations

import pytest

from perfsuite.compare import sides


class FakeProc:
    def __init__(self) -> None:
        self.code = None

    def poll(self):
        return self.code


class FakeSide:
    started: list = []

    def __init__(self, label, wait=True, **spec) -> None:
        self.label, self.spec, self.proc, self.closed, self.faults = label, spec, FakeProc(), False, 7
        self.readied = 0
        FakeSide.started.append(self)
        if label == "broken":
            raise RuntimeError("cannot start")

    def ready(self):
        self.readied += 1
        return self

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    FakeSide.started = []
    monkeypatch.setattr(sides, "Side", FakeSide)
    return FakeSide


def spec(label, keep=False):
    return dict(label=label, file="w.py", workload="w", params={"n": 1}, device="cpu", builds=1, heap="steady",
                threads=1, root=None, keep=keep)


def test_the_pool_serves_the_same_processes_to_every_case_and_the_others_start_each_time(fake):
    pool = sides.SidePool()
    cases = []
    for _ in range(3):
        pool.next_case()
        running: list = []
        got = sides.start_all([spec("good", keep=True), spec("cand"), spec("good", keep=True), spec("cand")],
                              running, pool)
        assert all(s.readied for s in got)
        assert [s.label for s in running] == ["cand", "cand"]  # the caller closes only these
        cases.append(got)
    goods = [(c[0], c[2]) for c in cases]
    assert goods[0] == goods[1] == goods[2] and goods[0][0] is not goods[0][1]  # two kept, reused
    assert len({id(c[1]) for c in cases}) == 3  # a candidate's sides are new in every case
    assert len(fake.started) == 2 + 2 * 3
    assert cases[2][0].faults == 0  # counted per case
    pool.close()
    assert all(s.closed for s in goods[0])


def test_a_kept_side_whose_process_ended_is_replaced(fake):
    pool = sides.SidePool()
    first = pool.side({k: v for k, v in spec("good").items() if k != "keep"})
    first.proc.code = -9
    pool.next_case()
    second = pool.side({k: v for k, v in spec("good").items() if k != "keep"})
    assert second is not first and first.closed and not second.closed
    pool.close()
    assert second.closed


def test_without_a_pool_every_side_starts_and_a_failing_start_leaves_the_started_ones_to_close(fake):
    running: list = []
    with pytest.raises(RuntimeError, match="cannot start"):
        sides.start_all([spec("a", keep=True), spec("broken")], running)
    assert [s.label for s in running] == ["a"]  # started, handed to the caller to close
