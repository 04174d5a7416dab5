"""The machine-speed reference: one fixed kernel timed between a run's blocks (issue 26).

On a shared VM the whole machine speeds up and slows down by 10-30% over seconds to minutes
(steal, neighbours, clocks), so two separate runs of unchanged code differ by that much and no
interval inside one run can see it. A fixed kernel timed in the same process, between the step's
blocks, moves with the machine: on the 2-core VM of 2026-11-27 (reports/quality/), eight fresh
processes of ResNet18 `ci` batch 8 spread with a CV of 11.5% in step time and 3.3% in step time
per reference-kernel time (matmul n=256: 6.7% and 4.1%). `compare` judges two records on that
ratio when both carry a reference (record.relative_units); the seconds reported stay the step's.

The ratio is taken sample by sample (`ratios`): each step sample over the reference read nearest
it in time, and a process's ratio is the median of those. The machine's speed moves within one
process too (a 1 s worker slot of matmul n=256 drifted by up to 20% on 2026-11-27), and one
process-wide median of ~24 one-millisecond blocks reads that drift with a few percent of noise of
its own. On 20 fresh pairs of runs of unchanged matmul n=256 (reports/quality/runs20-2026-11-27c),
the SD of the log ratio between two runs was 4.1% process median over blocks' median, 2.3% sample
by sample (7.9% in seconds). ResNet18 `ci` b8 gained nothing (10.4% and 10.1%): the kernel does
not follow that step's wander on the VM.

The kernel is a small fp32 matmul into a preallocated output: no allocation (no page faults, no
allocator in its time), the same work on every machine and torch, and compute-bound like most
steps. A block is short mini-blocks timed until two in a row agree (STEADY), so that the wake of the
step before it (its caches, its state) is not charged to the machine, and blocks come as often as
SHARE of the timing allows: many small readings of the machine's speed rather than a few.

Only where the step runs on the CPU (`taken_on`). On an H100 (2026-11-27, reports/gpu/) a 256x256
matmul on the device read 19-24 us a call, which is the host launching and synchronising, not the
GPU: between two runs of an unchanged 2048 matmul it moved 19% while the step moved 1%, and
`compare` per reference called the unchanged step 1.22x slower. A kernel cannot stand for both a
launch-bound and a device-bound step, and the GPU's speed did not drift like the VM's; CUDA records
are compared in seconds.
"""

from __future__ import annotations

from collections.abc import Callable

from perfsuite.core.record import REFERENCE_MIN_BLOCKS, reference_ratios
from perfsuite.stats.summary import median

KERNEL_N = 128
KERNEL_NAME = f"matmul {KERNEL_N}x{KERNEL_N} fp32"
BLOCK_S = 1e-3  # a mini-block is a quarter of this: ~0.25 ms of calls
# A block is timed mini-blocks until the kernel is steady; the last two's mean is the block's
# per-call time. Right after a ResNet18 step the kernel ran at 86 us a call for its first ~20
# calls and reached its steady 51 us only after ~3 ms (right after 256x256 matmuls: at once);
# timed at once, the reference measured the step's wake, not the machine, and a slowdown made of
# matmuls read as 1.7x per reference (reports/quality, 2026-11-27). A fixed 5 ms of warm calls fixed
# that but cost ~6 ms a block, so a 2 s worker slot held ~5 blocks and one slow block moved a
# process's ratio. Steady: two mini-blocks in a row agree within STEADY, and (once the process has
# MIN_KNOWN blocks) the latest is within WAKE of their median: a wake can be a plateau, and two
# readings of it agree. A machine that really slowed waits WARM_S and is then read as it is.
# So a block is anchored to the process's first blocks: a reading more than WAKE above them waits
# (a block that waited the whole WARM_S shows as mini_blocks == the cap in the record).
STEADY = 0.03
WAKE = 0.05
MIN_KNOWN = 3
WARM_S = 6e-3  # at most this long waiting for the kernel to be steady; then the last two count
SHARE = 0.05  # the reference's blocks take at most this share of the step's timing (~40 a 2 s slot)
# A process whose reference has fewer blocks carries none (core.record.REFERENCE_MIN_BLOCKS says why).
MIN_BLOCKS = REFERENCE_MIN_BLOCKS


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
        for _ in range(8):  # its first calls are slow (caches, lazy set-up): not the size of a call
            self.fn()
        per_call = clock.time_block(self.fn, 4) / 4
        self.calls = max(1, int(BLOCK_S / 4 / per_call)) if per_call > 0 else 1  # per mini-block
        self.max_minis = max(2, round(WARM_S / (BLOCK_S / 4)))
        self.samples_s: list[float] = []
        self.minis: list[int] = []  # mini-blocks each block took to agree
        self.at: list[int] = []  # the step samples timed before each block: where it fell among them
        self.spent_s = 0.0  # time inside take(), against SHARE of the timing since `started`
        self.started: float | None = None

    def due(self, now: float) -> bool:
        if self.started is None:
            self.started = now
            return True
        return self.spent_s <= SHARE * (now - self.started)

    def take(self, *, at: int) -> None:
        """One block, taken after `at` of the step's samples (where it falls among them: `ratios`)."""
        t0 = self.clock.now()
        times: list[float] = []
        known = median(self.samples_s) if len(self.samples_s) >= MIN_KNOWN else None
        if known is not None and known > 0 and len(self.samples_s) == MIN_KNOWN:  # sized on the steady speed
            self.calls = max(1, int(BLOCK_S / 4 / known))
        # The first blocks have nothing to go by: they wait the whole WARM_S, as the old fixed warm-up.
        while len(times) < self.max_minis:
            times.append(self.clock.time_block(self.fn, self.calls) / self.calls)
            if known is None or len(times) < 2:
                continue
            if abs(times[-1] - times[-2]) <= STEADY * min(times[-2:]) and times[-1] <= (1 + WAKE) * known:
                break
        self.samples_s.append((times[-1] + times[-2]) / 2)  # max_minis >= 2: always two
        self.minis.append(len(times))
        self.at.append(at)
        self.spent_s += self.clock.now() - t0

    def summary(self, timeline: list[float], builds_of: list[int]) -> dict | None:
        """What a record keeps (its `conditions["reference"]`); None below MIN_BLOCKS blocks. From the
        step's samples in time order (`timeline`, and the build each came from), also the step per
        reference time, kept raw (`sample_ratios`: every sample over the reference read nearest it,
        and with several builds `sample_builds`, the build of each), and `ratio` / `build_ratios`,
        their medians, written beside them for readers without perfsuite and never read back
        (perfsuite.core.record.reference_ratios derives them). (A block is taken only after a
        sample, so a reference with blocks has a timeline.)"""
        if len(self.samples_s) < MIN_BLOCKS:
            return None
        per = ratios(timeline, self.samples_s, self.at)
        out = {
            "kernel": self.name,
            "median_s": median(self.samples_s),
            "samples_s": list(self.samples_s),
            "calls_per_block": self.calls,
            "mini_blocks": list(self.minis),
            "at_sample": list(self.at),
            "sample_ratios": per,
        }
        if len(set(builds_of)) > 1:
            out["sample_builds"] = list(builds_of)
        # Derived, for readers without perfsuite, by the one formula readers use (never read back).
        out["ratio"], per_build = reference_ratios(out)
        if per_build:
            out["build_ratios"] = per_build
        return out


def ratios(timeline: list[float], blocks_s: list[float], at: list[int]) -> list[float]:
    """Each step sample (in time order) over the reference read nearest it in time: the mean of
    the block before it and the block after it, or the one there is. `at[j]`: how many samples
    came before block j (non-decreasing)."""
    if not blocks_s or len(blocks_s) != len(at):
        raise ValueError(f"{len(blocks_s)} reference blocks with {len(at)} positions")
    out, j = [], 0  # j: the first block after sample i
    for i, x in enumerate(timeline):
        while j < len(at) and at[j] <= i:
            j += 1
        near = [blocks_s[k] for k in (j - 1, j) if 0 <= k < len(blocks_s)]
        out.append(x / (sum(near) / len(near)))
    return out
