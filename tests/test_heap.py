"""perfsuite.measure.heap: glibc's heap held steady, the settle loop, the fault counter, and the
setting carried into a record. hold() is process-wide and for good, so every test that holds the
heap does it in a fresh process."""

import json
import subprocess
import sys
import textwrap

import pytest

from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError
from perfsuite.measure import heap

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux)")

# 180 MiB of new 9 MiB tensors (ResNet18's largest gradient) in a process whose heap is held, with
# and without a reserve made first: the reserve's touched pages serve them without faulting.
GROW = textwrap.dedent("""
    import json, sys, torch
    from perfsuite.measure import heap
    held = heap.hold()
    reserve_faults = heap.reserve() if sys.argv[1] == "reserve" else 0
    f0 = heap.minor_faults()
    ts = [torch.ones(9 * 2**18) for _ in range(20)]
    print(json.dumps({"held": held, "faults": heap.minor_faults() - f0, "reserve_faults": reserve_faults}))
""")


def _grow(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", GROW, mode], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@linux_only
def test_a_held_heap_with_a_reserve_grows_without_faulting():
    bare, reserved = _grow("none"), _grow("reserve")
    assert reserved["held"]["heap"] == "steady" and reserved["held"]["mmap_threshold"] == 32 * 2**20
    pages = 180 * 2**20 // 4096
    assert bare["faults"] > pages // 2  # new heap pages, each faulted in on first touch
    assert reserved["reserve_faults"] > pages // 2 and reserved["faults"] < pages // 50


def test_no_reserve_without_a_held_heap():
    """glibc would trim a reserve straight back: nothing is made unless the heap is held."""
    if heap.state()["heap"] == "steady":
        pytest.skip("this test process already holds its heap")
    assert heap.reserve() == 0


class Faults:
    """A fake fault counter: returns the next reading of a script, then stays at the last."""

    def __init__(self, readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


class Clock:
    def __init__(self, step_s=0.01):
        self.t, self.step_s = 0.0, step_s

    def now(self):
        return self.t

    def step(self):
        self.t += self.step_s


def test_settle_runs_until_enough_quiet_rotations_in_a_row():
    clock = Clock()
    # Readings before/after each rotation: faults in rotations 1 and 3, none from 4 on.
    faults = Faults([0, 100, 100, 100, 100, 150] + [150] * 40)
    res = heap.settle([clock.step, clock.step], clock.now, max_s=60, quiet_rounds=4, faults=faults)
    assert res["settled"] and res["faults"] == 150
    assert res["rotations"] == 3 + 4  # the quiet run restarts after the fault in rotation 3
    assert res["seconds"] == pytest.approx(7 * 2 * 0.01)


def test_settle_gives_up_at_its_time_or_rotation_limit_and_says_so():
    clock = Clock(step_s=0.5)
    always = iter(range(0, 10**9, 7))
    res = heap.settle([clock.step], clock.now, max_s=3.0, faults=lambda: next(always))
    assert not res["settled"] and res["rotations"] == 6 and res["seconds"] == pytest.approx(3.0)
    res = heap.settle([lambda: None], lambda: 0.0, max_s=3.0, max_rounds=25, faults=lambda: next(always))
    assert not res["settled"] and res["rotations"] == 25  # a clock that never moves cannot spin for ever


def test_fault_count_adds_up_every_region_it_wraps():
    count = heap.FaultCount(Faults([10, 15, 40, 41]))
    with count:
        pass
    with count:
        pass
    assert count.count == 5 + 1


def test_heap_mode_is_validated_where_it_is_given():
    with pytest.raises(ConfigError, match="heap must be one of default, steady, got 'huge'"):
        RunConfig(heap="huge")
    with pytest.raises(ValueError, match="heap must be one of"):
        heap.apply("huge")


@linux_only
def test_run_with_a_steady_heap_records_it_and_the_faults_it_timed(tmp_path):
    out = tmp_path / "r.json"
    subprocess.run([sys.executable, "-m", "perfsuite", "run", "matmul", "-p", "n=64", "--device", "cpu",
                    "--max-time", "0.5", "--heap", "steady", "--out", str(out)], check=True, capture_output=True)
    from perfsuite.storage.files import load_records

    (rec,) = load_records(out)
    assert rec.conditions["heap"] == "steady"
    assert rec.conditions["minor_faults_per_step"] < 1  # settled before the budget: nothing left to fault
    assert rec.warmup["heap_settle"]["settled"] and rec.warmup["heap_settle"]["reserve_faults"] > 1000


def test_a_default_run_records_the_default_heap_and_counts_faults(tmp_path):
    from perfsuite.core import registry
    from perfsuite.measure.runner import run_case

    if heap.state()["heap"] != "default":
        pytest.skip("this test process already holds its heap")
    rec = run_case(registry.get("matmul"), {"n": 32}, RunConfig(device="cpu", max_time=0.3))
    assert rec.conditions["heap"] == "default" and "heap_settle" not in rec.warmup
    assert isinstance(rec.conditions["minor_faults_per_step"], float)
