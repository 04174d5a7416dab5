"""A bounded torch.profiler window over a step: a Chrome/Perfetto JSON and a top-operators table.

Bounded on purpose: a few profiled steps after unprofiled ones (the profiler's schedule), so
traces stay a few MB even for a 0.5B-parameter model.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.core.text import slug
from perfsuite.storage import write


@dataclass(frozen=True)
class Trace:
    trace: Path
    table: Path
    profile: object  # the finished torch.profiler.profile
    wall_s: float  # wall time of the profiled steps together


def trace_window(
    step: Callable[[], object],
    out_dir: Path,
    label: str,
    device: str = "cpu",
    wait: int = 0,
    warmup: int = 2,
    active: int = 1,
) -> Trace:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    out_dir = Path(out_dir)
    write.make_dir(out_dir, "trace folder")
    trace, table = trace_files(out_dir, label)
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    wall = 0.0
    kwargs: dict[str, Any] = {}
    # One cycle only (repeat=1); accumulating its events keeps the profiler from warning that it
    # "clears events at the end of each cycle" (seen on CUDA, where warnings fail the tests).
    if "acc_events" in inspect.signature(profile.__init__).parameters:
        kwargs["acc_events"] = True
    with profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda p: write.from_tool(trace, p.export_chrome_trace),
        record_shapes=True,
        profile_memory=True,
        **kwargs,
    ) as prof:
        for i in range(wait + warmup + active):
            t0 = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize(device)
            if i >= wait + warmup:
                wall += time.perf_counter() - t0
            prof.step()
    sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    write.write_text(table, prof.key_averages().table(sort_by=sort, row_limit=25) + "\n")
    return Trace(trace, table, prof, wall)


def trace_files(out_dir: Path, label: str) -> tuple[Path, Path]:
    """Where the trace of `label` and its top-operators table go: in `out_dir`, named by the slug."""
    name = slug(label)
    return write.inside(out_dir, f"{name}.trace.json"), write.inside(out_dir, f"{name}.top-ops.txt")


def check_trace_files(out_dir: Path, label: str) -> None:
    """Both files of `label`'s trace checked before anything is measured, as the results file is:
    a link (or a folder) planted at either name refuses the command, instead of the trace failing
    after the measurement."""
    for path in trace_files(out_dir, label):
        write.check_output(path, "trace file", replace=True)


def trace_step(step: Callable[[], object], out_dir: Path, label: str, device: str = "cpu") -> tuple[Path, Path]:
    """One profiled step after two unprofiled ones (`perfsuite run --trace`)."""
    t = trace_window(step, out_dir, label, device)
    return t.trace, t.table
