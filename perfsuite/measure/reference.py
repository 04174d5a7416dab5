"""The machine-speed reference: one fixed kernel timed between a run's blocks (issue 26).

On a shared VM the whole machine speeds up and slows down by 10-30% over seconds to minutes
(steal, neighbours, clocks), so two separate runs of unchanged code differ by that much and no
interval inside one run can see it. A fixed kernel timed in the same process, between the step's
blocks, moves with the machine: on the 2-core VM of 2026-11-27 (reports/quality/), eight fresh
processes of ResNet18 `ci` batch 8 spread with a CV of 11.5% in step time and 3.3% in step time
per reference-kernel time (matmul n=256: 6.7% and 4.1%). `compare` judges two records on that
ratio when both carry a reference (record.relative_units); the seconds reported stay the step's.

The kernel is a small fp32 matmul into a preallocated output: no allocation (no page faults, no
allocator in its time), the same work on every machine and torch, and compute-bound like most
steps. A block starts with WARM_S of untimed calls, so that the wake of the step before it (its caches,
its state) is not charged to the machine.

Only where the step runs on the CPU (`taken_on`). On an H100 (2026-11-27, reports/gpu/) a 256x256
matmul on the device read 19-24 us a call, which is the host launching and synchronising, not the
GPU: between two runs of an unchanged 2048 matmul it moved 19% while the step moved 1%, and
`compare` per reference called the unchanged step 1.22x slower. A kernel cannot stand for both a
launch-bound and a device-bound step, and the GPU's speed did not drift like the VM's; CUDA records
are compared in seconds.
"""

from __future__ import annotations

from typing import Callable

from perfsuite.stats.summary import median

KERNEL_N = 128
KERNEL_NAME = f"matmul {KERNEL_N}x{KERNEL_N} fp32"
BLOCK_S = 1e-3  # timed calls per block: about this long
# Untimed calls before each block, about this long. Right after a ResNet18 step the kernel ran at
# 86 us a call for its first ~20 calls and reached its steady 51 us only after ~3 ms (right after
# 256x256 matmuls: at once); timed at once, the reference measured the step's wake, not the
# machine, and a slowdown made of matmuls read as 1.7x per reference (reports/quality, 2026-11-27).
WARM_S = 5e-3
GAP_S = 0.2  # at most one block (~6 ms) per this much of the step's timing: ~3% of a budget


def taken_on(device: str) -> bool:
    """Whether a run on `device` times the reference (the CPU only: see the module's docstring)."""
    return device == "cpu"


def build_kernel(device: str) -> Callable[[], object]:
    """The reference kernel's one call, on preallocated inputs and output."""
    import torch

    n = KERNEL_N
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(device) for _ in range(2))
    out = torch.empty(n, n, device=device)
    return lambda: torch.mm(a, b, out=out)


class Reference:
    """Times the reference kernel when `due`: `take()` adds one block's per-call time. The clock is
    the run's own (a CUDA clock synchronises around the block, a fake clock fakes it)."""

    def __init__(self, clock, device: str, kernel: Callable[[], object] | None = None) -> None:
        self.clock, self.device = clock, device
        self.fn = kernel or build_kernel(device)
        self.name = KERNEL_NAME
        self.fn()
        per_call = clock.time_block(self.fn, 4) / 4
        self.calls = max(1, int(BLOCK_S / per_call)) if per_call > 0 else 1
        self.warm_calls = max(1, int(WARM_S / per_call)) if per_call > 0 else 1
        self.samples_s: list[float] = []
        self.last: float | None = None

    def due(self, now: float) -> bool:
        return self.last is None or now - self.last >= GAP_S

    def take(self) -> None:
        for _ in range(self.warm_calls):  # untimed: the step's wake is the step's, not the machine's
            self.fn()
        self.samples_s.append(self.clock.time_block(self.fn, self.calls) / self.calls)
        self.last = self.clock.now()

    def summary(self) -> dict | None:
        """What a record keeps (its `conditions["reference"]`); None before any block."""
        if not self.samples_s:
            return None
        return {"kernel": self.name, "median_s": median(self.samples_s), "samples_s": list(self.samples_s),
                "calls_per_block": self.calls, "warm_calls": self.warm_calls}
