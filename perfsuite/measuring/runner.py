"""warm-up -> calibrate -> timed blocks -> record.

`time_blocks` is the timing algorithm alone: it sees a step, a clock and a config, so tests drive
it with a fake, seeded clock. `time_case` wraps it with the device, the instruments and the
record.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

from perfsuite.core.config import IN_PROCESS_BUILDS, RunConfig, resolve_device
from perfsuite.core.errors import USER_CODE_ERRORS, exception_text
from perfsuite.core.record import Record
from perfsuite.core.workload import Workload
from perfsuite.measuring import counted, energy, flops, heap, system
from perfsuite.measuring.energy import RaplCounter
from perfsuite.measuring.memory import CudaPeakMemory, HostPeakRSS
from perfsuite.measuring.nvml import NvmlSampler
from perfsuite.measuring.nvtx import nvtx_range
from perfsuite.measuring.reference import Reference
from perfsuite.measuring.reference import taken_on as reference_taken_on
from perfsuite.measuring.system import CpuUsage
from perfsuite.measuring.tf32 import torch_flags
from perfsuite.measuring.timing import Clock, clock_for, synchronize
from perfsuite.stats import summary as stats

# Warm-up grows its block until one block lasts this long, so that settling is judged on
# readings the clock's own cost does not dominate.
WARMUP_BLOCK_S = 1e-3
MAX_BLOCK = 1 << 26
# Readings of an empty block taken to estimate the clock's own cost (median of these).
OVERHEAD_READINGS = 25
# Above this IQR/median the record carries a noise warning (torch.utils.benchmark's habit).
NOISY_IQR = 0.10
# With several builds, each build's turn runs blocks for at least this long before the next
# build's: a fast step keeps its caches warm across a turn (one call each, a 256x256 matmul would
# be timed with the other builds' tensors in its cache), and drift within a round stays small.
TURN_S = 0.01
# A worker whose set-up (fork, builds, first calls) overran its slot still measures this share
# of its nominal budget (the later workers' slots absorb the overrun).
MIN_SLOT_SHARE = 0.25


def _noop() -> None:
    return None


@dataclass(frozen=True)
class Measurement:
    samples_s: list[float]  # per-step seconds, one per timed block, pooled in build order
    block_size: int
    clock_overhead_s: float
    warmup: dict
    converged: bool
    rel_ci_halfwidth: float
    measure_s: float
    warnings: list[str] = field(default_factory=list)
    builds_s: list[list[float]] = field(default_factory=list)  # each build's samples, in time order
    reference: dict | None = None  # the machine-speed reference timed between the blocks (Reference.summary)


def _settled(samples: list[float], window: int, tolerance: float) -> bool:
    """The last two windows' medians agree within `tolerance`, or within what the noise allows.

    The noise allowance (about two standard errors of the difference of two window medians)
    keeps a noisy but steady step from spending the whole warm-up budget chasing a tolerance
    its own jitter cannot meet. The jitter is estimated from successive differences, which a
    smooth warm-up trend barely moves (a plain IQR would mistake the trend for noise).
    """
    if len(samples) < 2 * window:
        return False
    recent = samples[-2 * window :]
    last = stats.median(recent[window:])
    prev = stats.median(recent[:window])
    # For iid normal x, median |x_i - x_(i-1)| = 0.954 sigma.
    sigma = stats.median([abs(b - a) for a, b in zip(recent, recent[1:])]) / 0.954
    se_median = 1.2533 * sigma / math.sqrt(window)
    allowance = max(tolerance * last, 2.0 * math.sqrt(2.0) * se_median)
    return abs(last - prev) <= allowance


def _budget_advice(hw: float, cfg: RunConfig, builds: bool = False) -> str:
    """The next step after a run that missed its target: the budget the interval's width asks
    for (it narrows as one over the square root of the time), or, past ten minutes, the roads
    that get there instead. `builds`: the interval came from builds' medians, whose spread a
    longer run does not shrink when the builds themselves differ."""
    if math.isinf(hw) or hw <= 0:
        return f"next: a longer --max-time (the step is too slow for {cfg.max_time:g}s to hold enough samples)"
    # The ratio capped before squaring: a target of 1e-300 must cost only the advice, never the
    # measurement it follows (issue 51: the overflow here discarded the record).
    need = cfg.max_time * min(hw / cfg.target_rel_ci, 1e6) ** 2
    if need > 600:
        return (
            "next: --processes 5 (the spread between builds and processes does not shrink with time), a wider "
            "--target-ci, or an interleaved `perfsuite gate` to compare versions"
        )
    more = " if the builds stay apart, --processes 5: their spread does not shrink with time" if builds else ""
    return f"next: --max-time {math.ceil(need)} (the interval narrows as 1/sqrt(time)){';' if more else ''}{more}"


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


@dataclass(frozen=True)
class Calibration:
    """How a step (or the two sides of a paired comparison) will be timed."""

    block_size: int
    clock_overhead_s: float
    step_estimate_s: float  # the fastest side's settled step time
    warmups: tuple[dict, ...]  # one warm-up summary per step


def calibrate(
    fns: list[Callable[[], object]],
    clock: Clock,
    cfg: RunConfig,
    *,
    block_s: float | None = None,
    region: Callable[[], AbstractContextManager] = contextlib.nullcontext,
) -> Calibration:
    """The one calibration engine (runner, paired comparisons, gate, pytest-benchmark front-end):
    read the clock's own cost, warm every step up until it settles, then choose one block size
    for all of them: the smallest whose clock cost stays under `cfg.clock_overhead_limit` of the
    fastest step's block, or at least `block_s` seconds of it when given (the gate wants blocks
    of a fixed length, short enough that drift within a pair stays small)."""
    overhead = clock_overhead(clock)
    with region():
        warms = tuple(warm_up(fn, clock, cfg, overhead) for fn in fns)
    est = min(w["step_estimate_s"] for w in warms)
    n = block_size_for(est, overhead, cfg.clock_overhead_limit)
    if block_s is not None:
        n = max(n, min(MAX_BLOCK, int(block_s / max(est, 1e-12))))
    return Calibration(block_size=n, clock_overhead_s=overhead, step_estimate_s=est, warmups=warms)


def _interval(groups: list[list[float]], confidence: float) -> float:
    """Relative half-width of the reported interval: from the build medians when there are several
    builds (stats.process_spread), never narrower than the pooled samples' own interval."""
    pooled = [x for g in groups for x in g]
    hw = stats.relative_ci_halfwidth(pooled, confidence)
    if len(groups) < 2 or any(not g for g in groups):
        return hw
    return max(hw, stats.process_spread(groups, confidence, unit="build").rel_ci_halfwidth)


def time_blocks(
    fn: Callable[[], object] | list[Callable[[], object]],
    clock: Clock,
    cfg: RunConfig,
    timed_region: Callable[[], AbstractContextManager] = contextlib.nullcontext,
    warmup_region: Callable[[], AbstractContextManager] = contextlib.nullcontext,
    deadline: float | None = None,
    reference: Reference | None = None,
) -> Measurement:
    """The timing algorithm: warm up, size the block, then timed blocks until the CI converges.

    `fn` may be several builds of the step (time_case makes cfg.builds of them): they are warmed up
    together and then take turns, in a rotating order, and the interval comes from how much their
    medians disagree, which is what a separate run (new allocations, new weights) would see and
    one build's samples cannot. The CI may stop the timing only after `cfg.min_fraction` of the
    budget (and `cfg.min_time` of timing). `deadline` (time.monotonic(), a worker's slot) ends the
    budget earlier when the set-up before it took part of the slot. `reference`
    (perfsuite.measuring.reference) is timed between the turns, in at most reference.SHARE of the
    timing, inside the budget: how fast the machine was while the step was timed."""
    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    k = len(fns)
    warnings: list[str] = []
    # The first call is taken apart, before the budget starts: it pays one-off costs
    # (torch.compile, lazy initialisation, first allocations) that can exceed a whole budget.
    # Its time is kept in the record as the cold start.
    with warmup_region():
        first_call_s = clock.time_block(fns[0], 1)
        for other in fns[1:]:
            clock.time_block(other, 1)
        # With the heap held (perfsuite.measuring.heap), run until the step stops faulting pages in:
        # set-up like the first call, bounded by the warm-up's own share of the budget.
        settled = heap.settle(fns, clock.now, cfg.warmup_max_fraction * cfg.max_time) if heap.held() else None
    # Set-up garbage is collected before the budget starts: a full collection with torch loaded
    # takes ~0.3 s on a loaded 2-core machine, most of a worker's share of a short budget.
    gc.collect()
    if deadline is not None:
        import time

        left = max(deadline - time.monotonic(), MIN_SLOT_SHARE * cfg.max_time)
        if left < cfg.max_time:
            cfg = replace(cfg, max_time=left, min_time=min(cfg.min_time, left))
    deadline_start = clock.now()
    # The builds share the warm-up's share of the budget, as the gate's do.
    warm_cfg = replace(
        cfg, warmup_min_fraction=cfg.warmup_min_fraction / k, warmup_max_fraction=cfg.warmup_max_fraction / k
    )
    cal = calibrate(fns, clock, warm_cfg, region=warmup_region)
    overhead, warm = cal.clock_overhead_s, dict(cal.warmups[0])
    warm["first_call_s"] = first_call_s
    if k > 1:
        warm["steps"] = sum(w["steps"] for w in cal.warmups)
        warm["seconds"] = sum(w["seconds"] for w in cal.warmups)
        warm["settled"] = all(w["settled"] for w in cal.warmups)
        warm["builds"] = [
            {key: w[key] for key in ("steps", "seconds", "settled", "step_estimate_s")} for w in cal.warmups
        ]
    if settled is not None:
        warm["heap_settle"] = settled
        if not settled["settled"]:
            warnings.append(
                f"the heap did not settle: {settled['faults']} page faults in {settled['rotations']} "
                f"warm-up calls ({settled['seconds']:.1f}s); faults may remain in the samples"
            )
    if not warm["settled"]:
        warnings.append(
            f"warm-up did not settle within {cfg.warmup_max_fraction:.0%} of the budget "
            f"({warm['steps']} steps, {warm['seconds']:.2f}s): early samples may be slow"
        )
    step_est, n = cal.step_estimate_s, cal.block_size
    remaining = cfg.max_time - (clock.now() - deadline_start)
    # Keep room for min_samples blocks of every build inside the budget, even if that costs clock accuracy.
    n_cap = max(1, int(remaining / (cfg.min_samples * k) / max(step_est, 1e-12))) if remaining > 0 else 1
    if n > n_cap:
        n = n_cap
    share = overhead / (n * step_est) if step_est > 0 else 0.0
    if share > cfg.clock_overhead_limit:
        warnings.append(
            f"clock overhead is {share:.2%} of a block (limit {cfg.clock_overhead_limit:.2%}): "
            f"the budget leaves no room for larger blocks"
        )
    # Blocks per turn: one build runs this many blocks before the next build takes over.
    per_turn = 1 if k == 1 else max(1, int(TURN_S / max(n * step_est, 1e-12)))
    may_stop_at = max(cfg.min_fraction * cfg.max_time, 0.0)

    groups: list[list[float]] = [[] for _ in fns]
    timeline: list[float] = []  # every sample in time order, for the drift test and the reference
    builds_of: list[int] = []  # the build each of them came from
    hw = math.inf
    converged = False
    gc.collect(1)  # warm-up's garbage is young: collected now, cheaply, rather than inside a timed block
    with timed_region():
        t0 = clock.now()
        next_check = cfg.min_samples * k
        rnd = 0
        done = False
        while not done:
            # A rotating order (A B C, B C A, C A B, ...): no build always runs first or after the same one.
            for j in range(k):
                i = (rnd + j) % k
                for _ in range(per_turn):
                    x = clock.time_block(fns[i], n) / n
                    groups[i].append(x)
                    timeline.append(x)
                    builds_of.append(i)
                if reference is not None and reference.due(clock.now()):
                    reference.take(at=len(timeline))
                now = clock.now()
                total = len(timeline)
                if now - deadline_start >= cfg.max_time or total >= cfg.max_samples:
                    done = True
                    break
            rnd += 1
            if done:
                break
            total = len(timeline)
            now = clock.now()
            if total >= next_check and now - t0 >= cfg.min_time and now - deadline_start >= may_stop_at:
                hw = _interval(groups, cfg.confidence)
                if hw <= cfg.target_rel_ci:
                    converged = True
                    break
                # Re-check after ~5% more samples: sorting every block would cost O(n^2 log n).
                next_check = total + max(1, total // 20)
        measure_s = clock.now() - t0
    groups = [g for g in groups if g]  # a budget that ran out mid-round can leave a build without samples
    samples = [x for g in groups for x in g]
    if not converged:
        hw = _interval(groups, cfg.confidence)
        ci = "undefined (too few samples)" if math.isinf(hw) else f"+-{hw:.2%}"
        basis = f"from {len(groups)} builds' medians" if len(groups) > 1 else "of the median"
        warnings.append(
            f"did not converge: the {cfg.confidence:.0%} CI {basis} is {ci} "
            f"(target +-{cfg.target_rel_ci:.2%}) after {len(samples)} samples; "
            f"budget of {cfg.max_time:g}s spent; {_budget_advice(hw, cfg, builds=len(groups) > 1)}"
        )
    drift = _drift_warning(timeline, cfg)
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
        builds_s=groups,
        reference=reference.summary(timeline, builds_of) if reference is not None else None,
    )


# Which torch flag lets each declared kind of fp32 kernel run as TF32 (keys of peak.tf32_flags).
_TF32_FLAG = {"matmul": "matmul", "conv": "cudnn"}
_FLAG_NAME = {"matmul": "torch.backends.cuda.matmul.allow_tf32", "cudnn": "torch.backends.cudnn.allow_tf32"}
_KERNEL_LIB = {"matmul": "cuBLAS", "conv": "cuDNN"}


def fp32_kernels(workload: Workload, params: dict) -> str | None:
    """Which kernels carry the workload's fp32 FLOPs with these resolved parameters: "matmul",
    "conv", or None where the workload does not say (Workload.fp32_kernels)."""
    kernels = workload.fp32_kernels
    if isinstance(kernels, tuple):  # (parameter name, {its value: kernels})
        name, by_value = kernels
        kernels = by_value.get(params.get(name))
        if kernels is None:
            raise ValueError(
                f"workload {workload.name!r}: fp32_kernels declares no kernels for {name}={params.get(name)!r}"
            )
    if kernels is not None and kernels not in _TF32_FLAG:
        raise ValueError(
            f"workload {workload.name!r}: fp32_kernels must be one of "
            f"{', '.join(map(repr, _TF32_FLAG))} or None, got {kernels!r}"
        )
    return kernels


def _peak_for(peak: dict | None, dtype: str, backends=None, kernels: str | None = None) -> dict | None:
    """The record's `peak` block: the measured roof this dtype's kernels ran against, and why.

    On CUDA an fp32 step runs on TF32 tensor cores only where the flag of the library running
    its kernels allows it: cuBLAS matmuls follow torch.backends.cuda.matmul.allow_tf32 (off by
    default), cuDNN convolutions torch.backends.cudnn.allow_tf32 (on by default). `kernels` is
    the workload's declaration ("matmul" or "conv"), so the roof follows that one flag: a plain
    fp32 matmul judged against the tf32 roof would show ~8x too low a fraction. Undeclared work
    (None) is judged against tf32 when either flag allows it: the flags cannot say which kernels
    used it, and the higher roof never overstates the fraction. Both flags and the declaration
    are recorded. `backends` is torch.backends on CUDA (its flags read now, at record time;
    tests pass a fake), None elsewhere. A roof this device's stored peak lacks gives no number,
    and says so.
    """
    if not peak:
        return None
    roof, tf32 = dtype, None
    why = f"{dtype} work: the {dtype} matmul roof"
    if backends is not None and dtype == "fp32":
        from perfsuite.measuring.tf32 import tf32_flags

        tf32 = tf32_flags(backends)
        governing: tuple[str, ...]
        if kernels is None:
            governing, what = ("matmul", "cudnn"), "fp32 work of undeclared kernels"
        else:
            governing, what = (_TF32_FLAG[kernels],), f"fp32 {kernels} work ({_KERNEL_LIB[kernels]})"
        allowed = [_FLAG_NAME[k] for k in governing if tf32[k]]
        if allowed:
            roof, why = "tf32", f"{what} with {' and '.join(allowed)} on: the tf32 roof"
        else:
            why = f"{what} with {' and '.join(_FLAG_NAME[k] for k in governing)} off: the true fp32 roof"
    flops = (peak.get("flops_per_s") or {}).get(roof)
    if not flops:
        why = f"no {roof} roof in this device's stored peak ({why}); rerun `perfsuite peak` to measure it"
    block = {
        "flops_per_s": flops,
        "dtype": dtype,
        "roof": roof,
        "why": why,
        "bytes_per_s": peak.get("bytes_per_s"),
        "measured": peak.get("measured"),
    }
    if tf32 is not None:
        block["tf32"] = tf32
        block["kernels"] = kernels
    return block


def time_case(
    workload: Workload,
    params: dict,
    cfg: RunConfig,
    *,
    env: dict | None = None,
    peak: dict | None = None,
    clock: Clock | None = None,
    after: Callable[[object], None] | None = None,
    deadline: float | None = None,
) -> Record:
    """Build the workload's step (untimed), measure it, and return its record; pinned to
    `cfg.cpus` with `cfg.threads_on(device)` torch threads, for this case only. `deadline`:
    a worker's slot (perfsuite.measuring.workers), which the build comes out of."""
    heap.apply(cfg.heap)  # process-wide and for good: a process that measures with it keeps it
    with system.pinned(cfg.cpus, cfg.threads_on(resolve_device(cfg.device))):
        return _run_case(workload, params, cfg, env=env, peak=peak, clock=clock, after=after, deadline=deadline)


def measured_conditions(
    cfg: RunConfig, usage: dict, faults: heap.FaultCount | None = None, steps: int = 0
) -> tuple[dict, list[str]]:
    """How a case was measured (the record's `conditions`) and the warnings the timed region's
    steal and other load call for. `usage` is system.CpuUsage's readings; `faults` counted the
    minor page faults of the `steps` timed steps."""
    import os

    import torch

    cond = {
        "processes": 1,  # the runner measures in this process; workers.merge counts its workers
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "pinned": cfg.cpus is not None,
        "torch_threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "threads_set": cfg.threads is not None,  # asked for; None: the default (RunConfig.threads_on)
        "steal_fraction": usage.get("steal_fraction"),
        "others_cpus": usage.get("others_cpus"),
        "busy_fraction": usage.get("busy_fraction"),
        "timed_wall_s": usage.get("wall_s"),
        "load_avg": system.read_load_average(),
        "heap": heap.state()["heap"],
        "heap_reason": heap.state().get("reason"),  # why steady was not held (e.g. a preloaded allocator)
        "minor_faults_per_step": faults.count / steps if faults is not None and steps else None,
        # TF32, cuDNN and determinism flags as this process measured with them (in a worker: the
        # caller's, set there by perfsuite.measuring.workers), whether or not a peak is stored.
        "torch_flags": torch_flags(),
    }
    return cond, conditions_warnings(cond)


def conditions_warnings(cond: dict) -> list[str]:
    """Warnings for the steal and other load a record's `conditions` saw in the timed region."""
    warnings = []
    if (cond.get("steal_fraction") or 0) > system.STEAL_WARN:
        warnings.append(f"hypervisor steal took {cond['steal_fraction']:.1%} of the CPU time during the timed region")
    if (cond.get("others_cpus") or 0) > system.OTHERS_WARN_CPUS:
        warnings.append(
            f"other processes kept {cond['others_cpus']:.1f} CPU(s) busy during the timed region "
            f"(this process may use {len(cond.get('cpus') or [])}): see `perfsuite system`"
        )
    return warnings


def _run_case(
    workload: Workload, params: dict, cfg: RunConfig, *, env, peak, clock, after, deadline: float | None = None
) -> Record:
    import torch

    device = resolve_device(cfg.device)
    resolved = workload.resolve(params)
    kernels = fp32_kernels(workload, resolved)  # before measuring: a bad declaration fails fast

    wanted = cfg.builds if cfg.builds is not None else IN_PROCESS_BUILDS
    count = min(wanted, workload.max_builds or wanted)
    builds = []
    build = counted.alike(lambda: workload.build(resolved, device))  # the first build counts the step's work
    try:
        # What a build's FLOP count could not see (an operator without a formula) goes in the record.
        with flops.warnings_heard() as flop_warnings:
            for _ in range(count):
                # Each build from the same seed, as a separate run would make it: builds then differ as
                # separate runs do (where their memory lands), not in their random weights.
                torch.manual_seed(cfg.seed)
                builds.append(build())
    except BaseException:
        for b in builds:
            _teardown(b)
        raise
    built = builds[0]
    clock = clock or clock_for(device, cfg.timing)
    is_cuda = device.startswith("cuda")
    label = f"{workload.name}"

    host_mem = HostPeakRSS()
    cuda_mem = CudaPeakMemory(device=device) if is_cuda else None
    nvml = NvmlSampler(index=torch.device(device).index or 0 if is_cuda else None, interval_s=cfg.nvml_interval)
    usage = CpuUsage()
    faults = heap.FaultCount()
    rapl = None if is_cuda else RaplCounter()  # the CPU packages' joules, where RAPL is readable

    @contextlib.contextmanager
    def timed_region():
        # Instruments wrap the timed blocks only: set-up, warm-up and calibration stay outside.
        with contextlib.ExitStack() as stack:
            stack.enter_context(nvtx_range(f"{label}/timed", cfg.nvtx))
            if len(builds) == 1:  # several builds: memory is read from one build alone, after timing
                stack.enter_context(host_mem)
                if cuda_mem is not None:
                    stack.enter_context(cuda_mem)
            stack.enter_context(nvml)
            if rapl is not None:
                stack.enter_context(rapl)
            stack.enter_context(usage)  # steal and other load: read from /proc/stat around the blocks
            stack.enter_context(faults)  # page faults: a fresh zeroed page each, inside the step's time
            yield

    extra: dict = {}
    hooks: list[str] = []  # what the workload's own hooks (extra, teardown) raised after measuring
    try:
        m = time_blocks(
            [b.fn for b in builds] if len(builds) > 1 else built.fn,
            clock,
            cfg,
            timed_region=timed_region,
            warmup_region=lambda: nvtx_range(f"{label}/warmup", cfg.nvtx),
            deadline=deadline,
            reference=Reference(clock, device) if cfg.reference and reference_taken_on(device) else None,
        )
        if built.extra is not None:
            extra = _user_extra(built.extra, hooks)
        signature = _signature(built.fn, device, hooks) if cfg.signature else None
        if after is not None:  # e.g. a profiler trace of the same built step, after measuring
            after(built)
        if len(builds) > 1:
            # The memory of the step is one build's: with the other builds alive, their weights,
            # optimiser state and caches would count too. So they go first, then the instruments
            # wrap a few steps of the remaining build (as many calls as one timed block).
            while len(builds) > 1:  # popped first (a teardown that raises is not retried), and no
                extra_build = builds.pop()  # name is left holding it (a loop variable kept one alive)
                hooks += _teardown(extra_build)
                del extra_build
            gc.collect()
            if is_cuda:
                torch.cuda.empty_cache()
            with host_mem:
                if cuda_mem is not None:
                    with cuda_mem:
                        for _ in range(max(m.block_size, 1)):
                            built.fn()
                else:
                    for _ in range(max(m.block_size, 1)):
                        built.fn()
    finally:
        for b in builds:
            hooks += _teardown(b)

    memory = host_mem.to_dict()
    if cuda_mem is not None:
        memory.update(cuda_mem.to_dict())
    steps = len(m.samples_s) * m.block_size
    conditions, load_warnings = measured_conditions(cfg, usage.readings, faults, steps)
    # Joules per step over the same timed region (issue 54): NVML's counter on a GPU, RAPL on the CPU.
    conditions["energy"] = energy.per_step(
        nvml.energy if rapl is None else rapl.reading, steps, built.work.items_per_step
    )
    conditions["builds"] = len(m.builds_s)
    if m.reference is not None:
        conditions["reference"] = m.reference
    warnings = list(m.warnings) + list(host_mem.warnings) + load_warnings + flop_warnings + list(dict.fromkeys(hooks))
    if cfg.heap == "steady" and conditions["heap"] != "steady":
        warnings.append(
            f"heap steady was asked for but not held ({heap.hold().get('reason')}): page faults stay in the step's time"
        )
    nvml_summary = nvml.summary()
    if is_cuda and nvml_summary["status"] != "ok":
        warnings.append(f"NVML unavailable: {nvml_summary['reason']}")
    peak_rec = _peak_for(peak, built.work.dtype, torch.backends if is_cuda else None, kernels)
    if peak_rec is None and built.work.flops_per_step:
        warnings.append("no machine peak stored for this device: run `perfsuite peak` for peak fractions")
    warm = dict(m.warmup)
    return Record(
        workload=workload.name,
        params=resolved,
        device=device,
        timing_method=clock.method,
        block_size=m.block_size,
        samples_s=tuple(m.samples_s),
        work=built.work,
        warmup=warm,
        memory=memory,
        nvml=nvml_summary,
        env=env if env is not None else {},
        peak=peak_rec,
        config={
            **cfg.to_dict(),
            "clock_overhead_s": m.clock_overhead_s,
            "rel_ci_halfwidth": None if math.isinf(m.rel_ci_halfwidth) else m.rel_ci_halfwidth,
            "measure_s": m.measure_s,
        },
        converged=m.converged,
        warnings=tuple(warnings),
        extra=extra,
        conditions=conditions,
        builds=tuple({"samples_s": g, "process": 0} for g in m.builds_s) if len(m.builds_s) > 1 else None,
        signature=signature,
    )


def _signature(step: Callable[[], object], device: str, warnings: list[str]) -> dict | None:
    """The step's work signature, one call after the timed blocks; a step that cannot run under the
    dispatch mode (or raises in it) is a warning, and the measurement stands without one."""
    from perfsuite.measuring import signature

    try:
        sig = signature.take(step, device)
        synchronize(device)
    except USER_CODE_ERRORS as exc:
        warnings.append(f"work signature not taken: {exception_text(exc)}"[:500])
        return None
    return sig


def _teardown(built) -> list[str]:
    """A build's `teardown`, after measuring: what it raises (sys.exit too) is a warning in the
    record, which the measurement keeps; the rest of the builds are torn down all the same."""
    if built.teardown is None:
        return []
    try:
        built.teardown()
    except USER_CODE_ERRORS as exc:
        return [f"the step's teardown failed: {exception_text(exc)}"[:500]]
    return []


def _user_extra(extra: Callable[[], object], warnings: list[str]) -> dict:
    """The workload's own measurements (`extra()`), read after the timed region: a dict of values
    a results file can hold. Anything else, or a raise, is left out with a warning in `warnings`:
    the measurement stands."""
    try:
        got = extra()
    except USER_CODE_ERRORS as exc:
        warnings.append(f"extra() failed, left out: {exception_text(exc)}"[:500])
        return {}
    if not isinstance(got, dict):
        warnings.append(f"extra() returned {type(got).__name__}, not a dict of values; left out")
        return {}
    try:
        json.dumps(got, allow_nan=True)  # what a results file can hold (NaN is written as null)
    except (TypeError, ValueError, RecursionError) as exc:
        warnings.append(f"extra() returned what a results file cannot hold, left out: {exception_text(exc)}"[:500])
        return {}
    return got
