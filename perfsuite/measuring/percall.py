"""Per-call times of a step, kept beside the runner's block times.

The runner times blocks of `block_size` calls; when a block holds more than one call its
samples are block means, and percentiles of block means understate the tails. A workload whose
users read latency percentiles (the Qwen batches) wraps its step in a PerCallTimer: every call
is timed on its own — `perf_counter` on the CPU; on CUDA a pair of events recorded around the
call on the current stream, read only when asked (no synchronisation inside the step) — and the
last `keep` times are returned by `times()`. The runner's timed region is the last thing that
calls the step before the record is made, so the tail of `times()` of length
(samples x block size) is exactly the timed calls (see `timed_tail`).

`fixed_protocol` is the study protocol: `warmup` untimed calls, then `runs` calls each timed on
its own (synchronised on CUDA).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

KEEP = 4096  # the last 4096 calls: percentiles over at most that many timed batches


class PerCallTimer:
    def __init__(self, fn: Callable[[], object], device: str = "cpu", keep: int = KEEP) -> None:
        self.fn, self.device = fn, device
        self.cuda = device.startswith("cuda")
        self._cpu: deque[float] = deque(maxlen=keep)
        self._events: deque = deque(maxlen=keep)

    def __call__(self):
        if self.cuda:
            import torch

            # On the step's device: `Event.record()` without a stream records on the *current*
            # device's stream (device 0 unless changed), so with `cuda:1` the events would time
            # device 0's idle stream instead of the step.
            stream = torch.cuda.current_stream(self.device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            out = self.fn()
            end.record(stream)
            self._events.append((start, end))
            return out
        t0 = time.perf_counter()
        out = self.fn()
        self._cpu.append(time.perf_counter() - t0)
        return out

    def times(self) -> list[float]:
        """Seconds per call, oldest first (at most `keep`)."""
        if self.cuda:
            if not self._events:
                return []
            self._events[-1][1].synchronize()
            return [s.elapsed_time(e) / 1e3 for s, e in self._events]
        return list(self._cpu)


def timed_tail(per_call: list[float], n_samples: int, block_size: int) -> list[float]:
    """The per-call times of the runner's timed region: the last n_samples x block_size calls
    (all that were kept, if fewer)."""
    n = n_samples * block_size
    return list(per_call[-n:]) if n > 0 else []


def fixed_protocol(fn: Callable[[], object], device: str, warmup: int, runs: int) -> list[float]:
    """`warmup` untimed calls, then `runs` calls timed one by one (synchronised on CUDA, as a
    study timing each batch end to end does): the seconds of each measured run."""
    sync: Callable[[], None] = lambda: None  # noqa: E731
    if device.startswith("cuda"):
        import torch

        sync = lambda: torch.cuda.synchronize(device)  # noqa: E731
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out
