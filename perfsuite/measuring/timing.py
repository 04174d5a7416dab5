"""Clocks that time a block of `n` calls of a step, correctly for the device.

Every clock answers `time_block(fn, n) -> seconds` for the whole block and `now()` for the
wall-clock budget. The runner never times single calls of fast steps: it sizes the block so
that what the clock itself adds (reading the timer, synchronising) is under 0.1% of a block.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Protocol

from perfsuite.core.config import TIMING_MODES

Step = Callable[[], object]


def synchronize(device) -> None:
    """Wait for the work queued on `device` (on a CPU there is nothing to wait for). The one
    place perfsuite waits for a device outside its clocks' timed blocks."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def synchronized(fn: Step, device) -> Step:
    """`fn` followed by a wait for `device`: what a caller's own wall clock (pytest-benchmark's,
    asv's) needs to see the device's work, not only its launch."""
    if not str(device).startswith("cuda"):
        return fn

    def step():
        fn()
        synchronize(device)

    return step


class Clock(Protocol):
    method: str

    def time_block(self, fn: Step, n: int) -> float: ...

    def now(self) -> float: ...


class PerfCounterClock:
    """CPU: wall time from `perf_counter_ns` (monotonic, highest resolution on Linux)."""

    method = "perf_counter_ns"

    def time_block(self, fn: Step, n: int) -> float:
        # itertools.repeat avoids creating an int per iteration, as timeit does.
        it = itertools.repeat(None, n)
        t0 = time.perf_counter_ns()
        for _ in it:
            fn()
        t1 = time.perf_counter_ns()
        return (t1 - t0) * 1e-9

    def now(self) -> float:
        return time.perf_counter()


class CudaEventClock:
    """CUDA: events recorded on the current stream measure device time of the block.

    The synchronise before `start` keeps earlier queued work out of this block; waiting on
    `end` makes the reading available. Host-side Python overhead that the GPU hides is not
    counted, which is what one wants for GPU-bound steps.
    """

    method = "cuda_event"

    def __init__(self, device) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)

    def time_block(self, fn: Step, n: int) -> float:
        torch = self._torch
        stream = torch.cuda.current_stream(self.device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        synchronize(self.device)
        it = itertools.repeat(None, n)
        start.record(stream)
        for _ in it:
            fn()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) * 1e-3  # elapsed_time is in milliseconds

    def now(self) -> float:
        return time.perf_counter()


class CudaSyncWallClock:
    """CUDA, host-inclusive: synchronise, wall clock, run, synchronise, wall clock.

    Counts launch overhead and host work the device waits for; use it when the question is
    "how long does the caller wait", e.g. small-batch inference.
    """

    method = "cuda_sync_wall"

    def __init__(self, device) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)

    def time_block(self, fn: Step, n: int) -> float:
        it = itertools.repeat(None, n)
        synchronize(self.device)
        t0 = time.perf_counter_ns()
        for _ in it:
            fn()
        synchronize(self.device)
        t1 = time.perf_counter_ns()
        return (t1 - t0) * 1e-9

    def now(self) -> float:
        return time.perf_counter()


def clock_for(device, timing: str = "event") -> Clock:
    """The right clock for `device`: perf_counter on CPU; CUDA events or sync+wall on CUDA."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return PerfCounterClock()
    if dev.type == "cuda":
        if timing == "event":
            return CudaEventClock(dev)
        if timing == "host":
            return CudaSyncWallClock(dev)
        raise ValueError(f"timing must be one of {TIMING_MODES}, got {timing!r}")
    raise ValueError(f"no clock for device type {dev.type!r}")
