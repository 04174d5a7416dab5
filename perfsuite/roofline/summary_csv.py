"""The summary CSV (full precision: it is data); the console's table of kernel families is
perfsuite.cli.roofline's.

Columns: the original eleven (`id, kernel, nvtx_range, flops, dram_bytes, l2_bytes, l1_bytes,
time_s, arithmetic_intensity, flop_per_s, bound`; `id` is a launch ID, `group` for a kernel
family, `range` for an NVTX range, `total` for the step) and, after them, the rest.
"""

from __future__ import annotations

import csv
import io

from perfsuite.roofline.ceilings import Ceilings
from perfsuite.roofline.metrics import PIPES
from perfsuite.roofline.points import Point

SUMMARY_COLUMNS = (
    "id",
    "kernel",
    "nvtx_range",
    "flops",
    "dram_bytes",
    "l2_bytes",
    "l1_bytes",
    "time_s",
    "arithmetic_intensity",
    "flop_per_s",
    "bound",
)
EXTRA_COLUMNS = (
    "short_name",
    "launches",
    "time_share",
    "pipe",
    "flops_exact",
    "flops_note",
    "tensor_flops",
    *(f"flops_{p}" for p in PIPES),
    "l2_intensity",
    "l1_intensity",
    "roof_flop_per_s",
    "attainable_flop_per_s",
    "pct_of_roof",
    "limiter",
    "model_flops",
    "executed_over_model",
)


def _f(x) -> str:
    """repr: the shortest text that reads back as the same float."""
    return "" if x is None else repr(float(x))


def summary_csv(
    rows: list[Point], ceilings: Ceilings, total_time: float | None = None, model_flops: float | None = None
) -> str:
    """`total_time`: the step's time, for time shares (default: the launch rows' sum)."""
    total_time = total_time or sum(p.time_s for p in rows if p.id not in ("group", "range", "total")) or None
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SUMMARY_COLUMNS + EXTRA_COLUMNS)
    for p in rows:
        v = ceilings.judge(p)
        pipes = p.pipes()
        model = model_flops if p.id == "total" else None
        w.writerow(
            [
                p.id,
                p.kernel,
                p.nvtx_range,
                _f(p.flops),
                _f(p.dram_bytes),
                _f(p.l2_bytes),
                _f(p.l1_bytes),
                _f(p.time_s),
                _f(p.intensity),
                _f(p.flop_per_s),
                v.bound,
                p.short,
                p.launches,
                _f(p.time_s / total_time if total_time else None),
                p.pipe,
                "true" if p.exact else "false",
                p.note,
                _f(p.tensor_flops),
                *(_f(pipes.get(pipe, 0.0)) if p.pipe_flops else "" for pipe in PIPES),
                _f(p.level_intensity(p.l2_bytes)),
                _f(p.level_intensity(p.l1_bytes)),
                _f(v.roof),
                _f(v.attainable),
                _f(v.pct),
                v.limiter,
                _f(model),
                _f(p.flops / model if model else None),
            ]
        )
    return buf.getvalue()
