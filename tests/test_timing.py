import time

import pytest

from perfsuite.measuring.timing import CudaEventClock, CudaSyncWallClock, PerfCounterClock, clock_for


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


# Device work long enough that the clock, not launch overhead, is what is measured. On the H100
# the old version (1 vs 8 matmuls of 2048^2, ~0.3 ms each, the first one paying cuBLAS's set-up)
# measured launch and initialisation costs and failed. A spin kernel of fixed cycles
# (torch.cuda._sleep) is pure device time; an 8192^2 fp32 matmul (1.1 TFLOP, ~20 ms on an H100)
# is real work. Launching one takes microseconds: under 0.1% of either.
SLEEP_CYCLES = 20_000_000  # ~10 ms at 1.4-2 GHz


def _device_work(kind: str):
    import torch

    if kind == "sleep":
        if not hasattr(torch.cuda, "_sleep"):
            pytest.skip(f"torch {torch.__version__} has no torch.cuda._sleep")
        return lambda: torch.cuda._sleep(SLEEP_CYCLES)
    a = torch.randn(8192, 8192, device="cuda:0")
    return lambda: a @ a


@pytest.mark.parametrize("kind", ["sleep", "matmul"])
def test_cuda_clocks_time_device_work(cuda_available, kind):
    step = _device_work(kind)
    for clock in (CudaEventClock("cuda:0"), CudaSyncWallClock("cuda:0")):
        clock.time_block(step, 1)  # first calls pay one-off costs (cuBLAS handle, workspace, module load)
        t1 = clock.time_block(step, 1)
        t4 = clock.time_block(step, 4)
        # Four times the work reads about four times as long: the clock sees the device work.
        assert 3.0 < t4 / t1 < 5.5, (clock.method, t1, t4)
    # The event clock measures the device time the host clock waits for: nearly all of it.
    event = CudaEventClock("cuda:0").time_block(step, 4)
    wall = CudaSyncWallClock("cuda:0").time_block(step, 4)
    assert 0.8 < event / wall < 1.05, (event, wall)


def test_cuda_clock_choice(cuda_available):
    assert clock_for("cuda:0").method == "cuda_event"
    assert clock_for("cuda:0", "host").method == "cuda_sync_wall"


def test_one_device_synchronise_emulated_on_cpu(monkeypatch):
    """measure.timing.synchronize is the one wait for a device: the host-inclusive clock, the
    pytest plugin's and profile-step's waits and asv's timer all go through it. Emulated: CUDA's
    synchronize is recorded, not run."""
    import torch

    from perfsuite.measuring import timing

    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waits.append(str(device)))
    timing.synchronize("cpu")
    assert waits == []  # nothing to wait for on a CPU
    timing.synchronize("cuda:1")
    assert waits == ["cuda:1"]  # the device named, not the current one

    calls = []
    step = lambda: calls.append("step")  # noqa: E731
    assert timing.synchronized(step, "cpu") is step
    waits.clear()
    timing.synchronized(step, "cuda:0")()
    assert calls == ["step"] and waits == ["cuda:0"]  # the wait after the work

    waits.clear()
    clock = timing.CudaSyncWallClock("cuda:0")
    clock.time_block(step, 3)
    assert waits == ["cuda:0", "cuda:0"]  # before the block (earlier work out) and after it


def test_asvs_timer_waits_for_the_device_it_measures(monkeypatch):
    import torch

    from perfsuite.core import config
    from perfsuite.frontends import asv

    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waits.append(str(device)))
    monkeypatch.setattr(config, "resolve_device", lambda spec: "cuda:0")
    monkeypatch.setattr(asv, "_SYNC", None)
    a = asv.device_timer()
    b = asv.device_timer()
    assert b >= a and waits == ["cuda:0", "cuda:0"]
