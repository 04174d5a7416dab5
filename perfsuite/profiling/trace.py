"""A bounded torch.profiler trace of one step: a Chrome/Perfetto JSON and a top-operators table.

Bounded on purpose: one profiled step after two unprofiled warm-up steps, so traces stay a few
MB even for a 0.5B-parameter model.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable


def trace_step(step: Callable[[], object], out_dir: Path, label: str, device: str = "cpu") -> tuple[Path, Path]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)[:120]
    for _ in range(2):
        step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
        step()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
    trace = out_dir / f"{slug}.trace.json"
    prof.export_chrome_trace(str(trace))
    sort = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    table = out_dir / f"{slug}.top-ops.txt"
    table.write_text(prof.key_averages(group_by_input_shape=False).table(sort_by=sort, row_limit=25) + "\n")
    return trace, table
