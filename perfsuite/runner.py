"""warm-up -> calibrate -> timed blocks -> record.

`measure` is the timing algorithm alone: it sees a step, a clock and a config, so tests drive
it with a fake, seeded clock. `run_case` wraps it with the device, the instruments and the
record.
"""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import dataclass, field
from typing import Callable, ContextManager

from perfsuite import stats
from perfsuite.config import RunConfig, resolve_device
from perfsuite.measure.memory import CudaPeakMemory, HostPeakRSS
from perfsuite.measure.nvml import NvmlSampler
from perfsuite.measure.nvtx import nvtx_range
from perfsuite.measure.timing import Clock, clock_for
from perfsuite.record import Record
from perfsuite.workloads.base import Workload

# Warm-up grows its block until one block lasts this long, so that settling is judged on
# readings the clock's own cost does not dominate.
WARMUP_BLOCK_S = 1e-3
MAX_BLOCK = 1 << 26
# Readings of an empty block taken to estimate the clock's own cost (median of these).
OVERHEAD_READINGS = 25
# Above this IQR/median the record carries a noise warning (torch.utils.benchmark's habit).
NOISY_IQR = 0.10


def _noop() -> None:
    return None


@dataclass(frozen=True)
class Measurement:
    samples_s: list[float]  # per-step seconds, one per timed block
    block_size: int
    clock_overhead_s: float
    warmup: dict
    converged: bool
    rel_ci_halfwidth: float
    measure_s: float
    warnings: list[str] = field(default_factory=list)


def _settled(samples: list[float], window: int, tolerance: float) -> bool:
    """The last two windows' medians agree within `tolerance`, or within what the noise allows.

    The noise allowance (about two standard errors of the difference of two window medians)
    keeps a noisy but steady step from spending the whole warm-up budget chasing a tolerance
    its own jitter cannot meet. The jitter is estimated from successive differences, which a
    smooth warm-up trend barely moves (a plain IQR would mistake the trend for noise).
    """
    if len(samples) < 2 * window:
        return False
    recent = samples[-2 * window:]
    last = stats.median(recent[window:])
    prev = stats.median(recent[:window])
    # For iid normal x, median |x_i - x_(i-1)| = 0.954 sigma.
    sigma = stats.median([abs(b - a) for a, b in zip(recent, recent[1:])]) / 0.954
    se_median = 1.2533 * sigma / math.sqrt(window)
    allowance = max(tolerance * last, 2.0 * math.sqrt(2.0) * se_median)
    return abs(last - prev) <= allowance


def _drift_warning(samples: list[float], cfg: RunConfig) -> str | None:
    """A trend across the timed region (thermal, a neighbour, unfinished warm-up) is reported:
    the median of the first third against the last third, when beyond the CI target and
    significant."""
    if len(samples) < 15:
        return None
    k = len(samples) // 3
    first, last = samples[:k], samples[-k:]
    change = stats.median(first) / stats.median(last) - 1.0
    if abs(change) <= max(2 * cfg.target_rel_ci, 0.02):
        return None
    p = stats.mann_whitney_p(last, first)
    if p >= 0.01:
        return None
    side = "slower" if change > 0 else "faster"
    return f"drift: the first third of the samples is {abs(change):.1%} {side} than the last third (p={p:.1g})"


def clock_overhead(clock: Clock) -> float:
    """What the clock adds to one reading: the median reading of an empty block."""
    return stats.median([clock.time_block(_noop, 0) for _ in range(OVERHEAD_READINGS)])


def warm_up(fn: Callable[[], object], clock: Clock, cfg: RunConfig, overhead_s: float = 0.0) -> dict:
    """Run the step until its time settles or the warm-up budget ends.

    Settled means: at least `warmup_min_fraction` of the budget spent, and the medians of the
    last two windows of blocks agree within `warmup_tolerance`. The time floor guards against
    a plateau of a few equally slow first steps (allocator growth, autotuning) that would
    otherwise look settled.
    """
    start = clock.now()
    budget = cfg.max_time * cfg.warmup_max_fraction
    floor = cfg.max_time * cfg.warmup_min_fraction
    n, steps, samples = 1, 0, []

    def per_step(t: float, n: int) -> float:
        # The clock's own cost is removed so the block size is calibrated on the step alone.
        return max(t - overhead_s, 0.0) / n

    # Phase 1: grow the block (these first calls also warm caches, allocators and autotuners).
    while True:
        t = clock.time_block(fn, n)
        steps += n
        if t >= WARMUP_BLOCK_S or n >= MAX_BLOCK or clock.now() - start >= budget:
            samples.append(per_step(t, n))
            break
        n *= 2
    # Phase 2: fixed block until settled. Slow steps (an epoch of a DataLoader) get smaller
    # windows, so that two of them fit in the warm-up budget; two blocks a window at least.
    per_block = max(samples[-1] * n, 1e-12)
    window = max(2, min(cfg.warmup_window, int(budget / per_block / 2)))
    settled = False
    while True:
        elapsed = clock.now() - start
        if elapsed >= floor and _settled(samples, window, cfg.warmup_tolerance):
            settled = True
            break
        if elapsed >= budget:
            break
        t = clock.time_block(fn, n)
        steps += n
        samples.append(per_step(t, n))
    return {
        "steps": steps,
        "block_size": n,
        "seconds": clock.now() - start,
        "settled": settled,
        "samples_s": samples,
        "window": window,
        "step_estimate_s": stats.median(samples[-window:]),
    }


def block_size_for(step_s: float, overhead_s: float, limit: float) -> int:
    """Smallest block whose clock overhead is below `limit` of the block's time."""
    if overhead_s <= 0:
        return 1
    return max(1, min(MAX_BLOCK, math.ceil(overhead_s / (limit * max(step_s, 1e-12)))))


def measure(
    fn: Callable[[], object],
    clock: Clock,
    cfg: RunConfig,
    timed_region: Callable[[], ContextManager] = contextlib.nullcontext,
    warmup_region: Callable[[], ContextManager] = contextlib.nullcontext,
) -> Measurement:
    """The timing algorithm: warm up, size the block, then timed blocks until the CI converges."""
    warnings: list[str] = []
    # The first call is taken apart, before the budget starts: it pays one-off costs
    # (torch.compile, lazy initialisation, first allocations) that can exceed a whole budget.
    # Its time is kept in the record as the cold start.
    with warmup_region():
        first_call_s = clock.time_block(fn, 1)
    deadline_start = clock.now()
    # The clock's cost is read first so that warm-up can calibrate on the step alone.
    overhead = clock_overhead(clock)
    with warmup_region():
        warm = warm_up(fn, clock, cfg, overhead)
    warm["first_call_s"] = first_call_s
    if not warm["settled"]:
        warnings.append(
            f"warm-up did not settle within {cfg.warmup_max_fraction:.0%} of the budget "
            f"({warm['steps']} steps, {warm['seconds']:.2f}s): early samples may be slow"
        )
    step_est = warm["step_estimate_s"]
    n = block_size_for(step_est, overhead, cfg.clock_overhead_limit)
    remaining = cfg.max_time - (clock.now() - deadline_start)
    # Keep room for min_samples blocks inside the budget, even if that costs clock accuracy.
    n_cap = max(1, int(remaining / cfg.min_samples / max(step_est, 1e-12))) if remaining > 0 else 1
    if n > n_cap:
        n = n_cap
    share = overhead / (n * step_est) if step_est > 0 else 0.0
    if share > cfg.clock_overhead_limit:
        warnings.append(
            f"clock overhead is {share:.2%} of a block (limit {cfg.clock_overhead_limit:.2%}): "
            f"the budget leaves no room for larger blocks"
        )

    samples: list[float] = []
    hw = math.inf
    converged = False
    gc.collect()  # collect set-up garbage now rather than inside a timed block
    with timed_region():
        t0 = clock.now()
        next_check = cfg.min_samples
        while True:
            samples.append(clock.time_block(fn, n) / n)
            now = clock.now()
            k = len(samples)
            if k >= next_check and now - t0 >= cfg.min_time:
                hw = stats.relative_ci_halfwidth(samples, cfg.confidence)
                if hw <= cfg.target_rel_ci:
                    converged = True
                    break
                # Re-check after ~5% more samples: sorting every block would cost O(n^2 log n).
                next_check = k + max(1, k // 20)
            if now - deadline_start >= cfg.max_time or k >= cfg.max_samples:
                break
        measure_s = clock.now() - t0
    if not converged:
        hw = stats.relative_ci_halfwidth(samples, cfg.confidence)
        ci = "undefined (too few samples)" if math.isinf(hw) else f"+-{hw:.2%}"
        warnings.append(
            f"did not converge: the {cfg.confidence:.0%} CI of the median is {ci} "
            f"(target +-{cfg.target_rel_ci:.2%}) after {len(samples)} samples; "
            f"budget of {cfg.max_time:g}s spent"
        )
    drift = _drift_warning(samples, cfg)
    if drift:
        warnings.append(drift)
    if len(samples) >= 4:
        spread = stats.iqr(samples) / stats.median(samples)
        if spread > NOISY_IQR:
            warnings.append(f"noisy: IQR is {spread:.1%} of the median")
    return Measurement(
        samples_s=samples,
        block_size=n,
        clock_overhead_s=overhead,
        warmup=warm,
        converged=converged,
        rel_ci_halfwidth=hw,
        measure_s=measure_s,
        warnings=warnings,
    )


def _peak_for(peak: dict | None, dtype: str) -> dict | None:
    if not peak:
        return None
    flops = (peak.get("flops_per_s") or {}).get(dtype)
    return {
        "flops_per_s": flops,
        "dtype": dtype,
        "bytes_per_s": peak.get("bytes_per_s"),
        "measured": peak.get("measured"),
    }


def run_case(
    workload: Workload,
    params: dict,
    cfg: RunConfig,
    *,
    env: dict | None = None,
    peak: dict | None = None,
    clock: Clock | None = None,
    after: Callable[[object], None] | None = None,
) -> Record:
    """Build the workload's step (untimed), measure it, and return its record."""
    import torch

    device = resolve_device(cfg.device)
    resolved = workload.resolve(params)
    torch.manual_seed(cfg.seed)
    built = workload.build(resolved, device)
    clock = clock or clock_for(device, cfg.timing)
    is_cuda = device.startswith("cuda")
    label = f"{workload.name}"

    host_mem = HostPeakRSS()
    cuda_mem = CudaPeakMemory(device=device) if is_cuda else None
    nvml = NvmlSampler(index=torch.device(device).index or 0 if is_cuda else None,
                       interval_s=cfg.nvml_interval)

    @contextlib.contextmanager
    def timed_region():
        # Instruments wrap the timed blocks only: set-up, warm-up and calibration stay outside.
        with contextlib.ExitStack() as stack:
            stack.enter_context(nvtx_range(f"{label}/timed", cfg.nvtx))
            stack.enter_context(host_mem)
            if cuda_mem is not None:
                stack.enter_context(cuda_mem)
            stack.enter_context(nvml)
            yield

    extra: dict = {}
    try:
        m = measure(
            built.fn,
            clock,
            cfg,
            timed_region=timed_region,
            warmup_region=lambda: nvtx_range(f"{label}/warmup", cfg.nvtx),
        )
        if built.extra is not None:
            extra = built.extra()
        if after is not None:  # e.g. a profiler trace of the same built step, after measuring
            after(built)
    finally:
        if built.teardown is not None:
            built.teardown()

    memory = host_mem.to_dict()
    if cuda_mem is not None:
        memory.update(cuda_mem.to_dict())
    warnings = list(m.warnings) + list(host_mem.warnings)
    nvml_summary = nvml.summary()
    if is_cuda and nvml_summary["status"] != "ok":
        warnings.append(f"NVML unavailable: {nvml_summary['reason']}")
    peak_rec = _peak_for(peak, built.work.dtype)
    if peak_rec is None and built.work.flops_per_step:
        warnings.append("no machine peak stored for this device: run `perfsuite peak` for peak fractions")
    warm = dict(m.warmup)
    return Record(
        workload=workload.name,
        params=resolved,
        device=device,
        timing_method=clock.method,
        block_size=m.block_size,
        samples_s=m.samples_s,
        work=built.work,
        warmup=warm,
        memory=memory,
        nvml=nvml_summary,
        env=env if env is not None else {},
        peak=peak_rec,
        config={**cfg.to_dict(), "clock_overhead_s": m.clock_overhead_s,
                "rel_ci_halfwidth": None if math.isinf(m.rel_ci_halfwidth) else m.rel_ci_halfwidth,
                "measure_s": m.measure_s},
        converged=m.converged,
        warnings=warnings,
        extra=extra,
    )
