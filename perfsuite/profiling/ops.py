"""One side's operators: a torch.profiler window over a few steps, aggregated per step, and the
peak memory of one step. Runs where the step lives (a side process of `perfsuite why`).

The profiler's own aggregation does the work: `key_averages(group_by_input_shape=True)` groups
by operator name and input shapes, so `aten::mm` on two shapes stays two rows. Self times (the
operator's own time, children excluded) add up to the step without double counting, which is
what a difference between two sides must be made of. Memory is `profile_memory`'s self figure:
bytes the operator allocated less what it freed, net; a positive change is an operator that now
keeps more.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from perfsuite.measuring.memory import CudaPeakMemory, HostPeakRSS

# Pseudo-events of the profiler, not operators of the step.
_NOT_OPERATORS = ("[memory]", "ProfilerStep")


def profile_ops(step: Callable[[], object], steps: int, device: str = "cpu", warmup: int = 1) -> list[dict]:
    """Operators of `steps` profiled steps after `warmup` unprofiled ones, per step: name,
    input shapes, calls, self CPU and device time (us), self CPU and device memory (bytes)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    cuda = device.startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    for _ in range(warmup):
        step()
    sync()  # nothing queued before the window may land inside it
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    kwargs: dict[str, Any] = {}
    if "acc_events" in inspect.signature(profile.__init__).parameters:
        kwargs["acc_events"] = True  # one window, no schedule: nothing to clear between cycles
    with profile(activities=activities, record_shapes=True, profile_memory=True, **kwargs) as prof:
        for _ in range(steps):
            step()
        sync()
    return operator_rows(prof.key_averages(group_by_input_shape=True), steps)


# Operators that hold less than this share of the kernels' device time: the step's kernels were
# launched by something that is no operator (a replayed CUDA graph: cudaGraphLaunch).
HELD_SHARE = 0.95


def operator_rows(events, steps: int) -> list[dict]:
    """The profiler's aggregated rows as `why` compares them, per step: every operator with its self
    device time, and every kernel as "[kernel] NAME" (`kernel`: True) with its own. Which of the two
    holds the step's device time is decided for both sides at once (device_rows): decided per side,
    a step near the line read by operators on one side and by kernels on the other."""
    events = [e for e in events if not e.key.startswith(_NOT_OPERATORS)]
    rows = [_row(e, steps, e.key) for e in events if not _on_the_device(e)]
    return rows + [{**_row(e, steps, f"[kernel] {e.key}"), "kernel": True} for e in events if _on_the_device(e)]


def by_kernel(windows: list[list[dict]]) -> bool:
    """Whether operators hold under HELD_SHARE of the kernels' device time in any of `windows`
    (operator_rows of either side): a graph-replayed step, whose kernels belong to no operator."""
    for rows in windows:
        kernel_us = sum(r["self_device_us"] for r in rows if r.get("kernel"))
        held_us = sum(r["self_device_us"] for r in rows if not r.get("kernel"))
        if kernel_us > 0 and held_us < HELD_SHARE * kernel_us:
            return True
    return False


def device_rows(rows: list[dict], kernels: bool) -> list[dict]:
    """`rows` (operator_rows) with the device time counted once: by kernel (`kernels`; the operators
    keep their CPU time only) or by operator (the kernel rows left out: each kernel's time is already
    its launching operator's self device time)."""
    if not kernels:
        return [r for r in rows if not r.get("kernel")]
    return [{k: v for k, v in r.items() if k != "kernel"} if r.get("kernel") else {**r, "self_device_us": 0.0}
            for r in rows]  # fmt: skip


def _row(e, steps: int, name: str) -> dict:
    return {
        "name": name,
        "shapes": str(e.input_shapes or []),
        "calls": e.count / steps,
        "self_cpu_us": e.self_cpu_time_total / steps,
        "self_device_us": _attr(e, "self_device_time_total", "self_cuda_time_total") / steps,
        "self_cpu_bytes": e.self_cpu_memory_usage / steps,
        "self_device_bytes": _attr(e, "self_device_memory_usage", "self_cuda_memory_usage") / steps,
    }


def _on_the_device(event) -> bool:
    """A kernel, memcpy or memset row: its time is already the self device time of the operator
    that launched it (on an H100, aten::mm's 233 us was its two gemm kernels' 136 + 97 us), so
    listing both counted the device's time twice."""
    kind = getattr(event, "device_type", None)
    return kind is not None and getattr(kind, "name", str(kind)).upper() not in ("CPU", "DEVICETYPE.CPU")


def _attr(event, new: str, old: str) -> float:
    # torch renamed cuda_* to device_* (2.4); the old names warn, and warnings fail our tests.
    return float(getattr(event, new) if hasattr(event, new) else getattr(event, old, 0.0) or 0.0)


def step_peak_memory(step: Callable[[], object], device: str = "cpu") -> dict:
    """Peak memory of one step, as a record's memory is read (perfsuite.measuring.memory): host RSS
    of the region above its start; on CUDA the caching allocator's max allocated."""
    cuda = device.startswith("cuda")
    step()  # one warm step first: the first call's lazy allocations are set-up, not the step
    host = HostPeakRSS()
    gpu = CudaPeakMemory(device=device) if cuda else None
    with host:
        if gpu is None:
            step()
        else:
            with gpu:
                step()
    out = {**host.to_dict(), "warnings": list(host.warnings)}
    if gpu is not None:
        out.update(gpu.to_dict())
        # What the step itself allocated above what was live before it.
        out["cuda_peak_delta_bytes"] = max(0, (gpu.max_allocated or 0) - (gpu.allocated_before or 0))
    return out
