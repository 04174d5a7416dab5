"""perfsuite.measuring.counted: a case's step is counted (FLOPs, saved bytes) by its first build only,
in-process and across worker processes; the others get the same counts."""

import pytest
import torch
from fakeclock import FakeClock

from perfsuite.core.config import RunConfig
from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.workload import BuiltStep, Workload
from perfsuite.measuring import counted, workers
from perfsuite.measuring.flops import count_flops
from perfsuite.measuring.runner import time_case
from perfsuite.measuring.saved import saved_tensor_bytes

N = 24


def _build(params, device):
    """Counts its step's work as a workload does; every counting call of its step is noted in the
    file `params["log"]`, so that the test sees counts made in forked workers too."""
    a = torch.randn(N, N, requires_grad=True)

    def step():
        return (a @ a).sum()

    def counted_step():
        with open(params["log"], "a") as f:
            f.write("x\n")
        return step()

    flops = count_flops(counted_step)
    nbytes = saved_tensor_bytes(counted_step)
    return BuiltStep(
        fn=step,
        work=Work(
            items_per_step=1,
            item_unit="calls",
            flops_per_step=flops,
            flops_method="FlopCounterMode",
            bytes_per_step=float(nbytes),
        ),
    )


COUNTING = Workload("counting", "counts its work at build", (Param("log", str, ""),), _build)


def test_the_first_of_a_processs_builds_counts_and_the_others_get_its_counts(tmp_path, no_gc_pauses):
    log = tmp_path / "calls"
    rec = time_case(
        COUNTING,
        {"log": str(log)},
        RunConfig(max_time=0.2, processes=1, builds=3, device="cpu"),
        clock=FakeClock(step_s=1e-4, noise=0.01, seed=1),
        env={},
    )
    assert len(rec.builds) == 3
    assert log.read_text().count("x") == 2  # one build counted: its FLOPs, then its saved bytes
    assert rec.work.flops_per_step == 2 * N**3 and rec.work.bytes_per_step > 0


def test_the_first_worker_counts_and_the_later_workers_get_its_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "START_METHOD", "fork")
    log = tmp_path / "calls"
    rec = workers.run_in_workers(
        COUNTING,
        {"log": str(log)},
        RunConfig(max_time=0.6, processes=3, device="cpu"),
        clock=FakeClock(step_s=1e-4, noise=0.01, seed=2),
        env={},
    )
    assert len(rec.processes) == 3
    assert log.read_text().count("x") == 2  # the first worker's build alone ran the counters
    assert rec.work.flops_per_step == 2 * N**3


def test_workers_of_several_builds_each_count_once(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "START_METHOD", "fork")
    log = tmp_path / "calls"
    rec = workers.run_in_workers(
        COUNTING,
        {"log": str(log)},
        RunConfig(max_time=0.6, processes=2, builds=2, device="cpu"),
        clock=FakeClock(step_s=1e-4, noise=0.01, seed=3),
        env={},
    )
    assert len(rec.processes) == 2 and len(rec.builds) == 4
    assert log.read_text().count("x") == 2


def test_a_failed_count_keeps_the_later_counts_in_their_places():
    @counted.once_per_case(stand_in=-1)
    def count(fn):
        return fn()

    steps = [lambda: 1 / 0, lambda: 7]  # what the build's two counting calls run
    build = counted.alike(lambda: [_try(count, steps[0]), count(steps[1])])
    assert build() == [None, 7]
    # The next build counts again the call that failed (now it succeeds) and gets the first build's 7
    # for the second call: a failure must not shift the 7 onto the first call.
    steps[:] = [lambda: 5, lambda: 9]
    assert build() == [5, 7]


def _try(count, fn):
    try:
        return count(fn)
    except ZeroDivisionError:
        return None


def test_counts_are_handed_out_in_the_order_made_and_a_failed_count_is_not_kept():
    calls = []

    @counted.once_per_case(stand_in=-1)
    def count(fn):
        calls.append(fn)
        return fn()

    with counted.shared() as first:
        assert [count(lambda: 1), count(lambda: 2)] == [1, 2]
        with pytest.raises(ZeroDivisionError):
            count(lambda: 1 / 0)
    with counted.shared(first) as second:
        with counted.shared():  # a frame without counts hands out its outer frame's
            assert [count(lambda: 9), count(lambda: 9), count(lambda: 3)] == [1, 2, 3]
    assert len(calls) == 4 and list(second.values()) == [[1, 2, 3]]
    assert count(lambda: 5) == 5  # outside any frame: counted


def test_inside_stood_in_nothing_is_counted_and_each_count_hands_out_its_stand_in():
    """The instruction count's child builds a step whose FLOPs nobody reads: under Callgrind the
    counts' runs of a ResNet18 ci step were most of its build. Frames and later builds are
    untouched by what stood in."""
    calls = []

    @counted.once_per_case(stand_in=-1)
    def count(fn):
        calls.append(fn)
        return fn()

    with counted.shared() as made:
        with counted.stood_in():
            assert count(lambda: 4) == -1 and calls == []
        assert count(lambda: 4) == 4 and made == {f"{count.__module__}.{count.__qualname__}": [4]}
    assert len(calls) == 1
