import time

import pytest

from perfsuite.measure.timing import CudaEventClock, CudaSyncWallClock, PerfCounterClock, clock_for


def test_cpu_clock_is_perf_counter():
    assert clock_for("cpu").method == "perf_counter_ns"


def test_perf_counter_clock_times_the_block():
    calls = []
    t = PerfCounterClock().time_block(lambda: (calls.append(1), time.sleep(0.005)), 3)
    assert len(calls) == 3
    assert 0.015 <= t < 0.5


def test_empty_block_costs_little():
    clock = PerfCounterClock()
    readings = sorted(clock.time_block(lambda: None, 0) for _ in range(50))
    assert readings[25] < 50e-6


def test_unknown_timing_mode_is_rejected(cuda_available):
    with pytest.raises(ValueError, match="timing must be one of"):
        clock_for("cuda:0", "sometimes")


def test_cuda_clocks_time_device_work(cuda_available):
    import torch

    a = torch.randn(2048, 2048, device="cuda:0")
    for clock in (CudaEventClock("cuda:0"), CudaSyncWallClock("cuda:0")):
        t1 = clock.time_block(lambda: a @ a, 1)
        t8 = clock.time_block(lambda: a @ a, 8)
        assert t8 > 3 * t1 > 0
    assert clock_for("cuda:0").method == "cuda_event"
    assert clock_for("cuda:0", "host").method == "cuda_sync_wall"
