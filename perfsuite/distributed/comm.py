"""The communication share of one distributed training step, from a torch.profiler trace.

After measuring, every rank runs one step with its phases marked (forward, loss, backward,
optimizer_step) under torch.profiler; each rank reads its own trace:

- communication: the intervals in which a collective was in flight. On CUDA, the NCCL kernels
  on the device (names containing "nccl"); on CPU, gloo's work items ("gloo:all_reduce",
  "gloo:broadcast", ...), which gloo's own threads run while the step's thread goes on;
- compute: on CUDA, every other kernel; on CPU, the operators on the step's thread ("aten::..."
  and autograd's backward functions);
- overlap: the time both were busy. DDP starts each gradient bucket's all-reduce as soon as the
  bucket is ready, during backward; what is not overlapped (`exposed_comm_s`) is the step waiting
  for the network, which is what scaling loses to communication.

All are unions of intervals inside the profiled step, so shares are of that step's wall time.
The profiler slows the step's operators (more on CPU than on CUDA), so the shares are of the
profiled step, not exactly of the timed ones: read them as where the time goes, and the
record's median as how long it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

STEP_RANGE = "perfsuite.distributed_step"


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def intersect(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Both arguments disjoint and sorted (as `union` returns them)."""
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if b > a:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def shares(step: tuple[float, float], comm: list[tuple[float, float]], compute: list[tuple[float, float]]) -> dict:
    """The step's split, all in the step's time units (seconds here)."""
    lo, hi = step

    def clip(xs):
        return union((max(a, lo), min(b, hi)) for a, b in xs)

    c, k = clip(comm), clip(compute)
    step_s, comm_s, compute_s = hi - lo, length(c), length(k)
    overlap = length(intersect(c, k))
    return {
        "step_s": step_s,
        "comm_s": comm_s,
        "compute_s": compute_s,
        "overlap_s": overlap,
        "exposed_comm_s": comm_s - overlap,
        "comm_share": comm_s / step_s if step_s > 0 else None,
        "exposed_comm_share": (comm_s - overlap) / step_s if step_s > 0 else None,
        "overlapped_fraction": overlap / comm_s if comm_s > 0 else None,
    }


def _is_kernel(e) -> bool:
    from torch.autograd import DeviceType

    return getattr(e, "device_type", None) == DeviceType.CUDA


def analyse(events, cuda: bool) -> dict:
    """Communication, compute and their overlap in the profiled step (see the module's docstring)."""
    events = list(events)
    steps = [e for e in events if e.name == STEP_RANGE and not _is_kernel(e)]
    if not steps:
        raise RuntimeError(f"the profile has no {STEP_RANGE!r} range")
    top = steps[0]
    span = (top.time_range.start * 1e-6, top.time_range.end * 1e-6)

    def iv(e):
        return (e.time_range.start * 1e-6, e.time_range.end * 1e-6)

    kernels = [e for e in events if _is_kernel(e)] if cuda else []
    if kernels:
        comm_ev = [e for e in kernels if "nccl" in e.name.lower()]
        compute_ev = [e for e in kernels if "nccl" not in e.name.lower()]
        source = "CUDA kernels: NCCL against the rest"
    else:
        comm_ev = [e for e in events if e.name.startswith(("gloo:", "nccl:")) and not _is_kernel(e)]
        compute_ev = [
            e
            for e in events
            if e.thread == top.thread
            and not _is_kernel(e)
            and (e.name.startswith("aten::") or e.name.startswith("autograd::engine::evaluate_function"))
        ]
        source = "host: gloo work items against the step thread's operators"
    out = shares(span, [iv(e) for e in comm_ev], [iv(e) for e in compute_ev])
    ops: dict[str, int] = {}
    for e in comm_ev:
        ops[e.name] = ops.get(e.name, 0) + 1
    out.update(collectives=len(comm_ev), comm_ops=ops, source=source)
    return out


def profile_comm(
    make_marked: Callable[[Callable], Callable[[], object]], ctx, trace_dir: str | None = None, label: str = "case"
) -> dict:
    """One step profiled on every rank (the ranks run it together); this rank's analysis."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = ctx.device.startswith("cuda")
    step = make_marked(record_function)
    step()  # the marked step once unprofiled: its own first call is not the one profiled
    if cuda:
        torch.cuda.synchronize(ctx.device)
    dist.barrier(group=ctx.ctrl)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        with record_function(STEP_RANGE):
            step()
            if cuda:
                torch.cuda.synchronize(ctx.device)
    out = analyse(prof.events(), cuda)
    if trace_dir:
        from perfsuite.core.text import slug
        from perfsuite.storage import write

        write.make_dir(trace_dir, "trace folder")
        path = write.inside(trace_dir, f"{slug(label)}.rank{ctx.rank}.trace.json")
        write.from_tool(path, prof.export_chrome_trace)
        out["trace"] = str(path)
    return out
