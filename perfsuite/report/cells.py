"""A record's figures as display strings, shared by the console table and the markdown page."""

from __future__ import annotations

from perfsuite.record import Record
from perfsuite.units import fmt_bytes, fmt_rate, fmt_seconds


def record_cells(r: Record) -> dict[str, str]:
    s = r.stats
    mem = r.memory.get("host_peak_delta_bytes")
    cuda = r.memory.get("cuda_max_allocated_bytes")
    return {
        "median": fmt_seconds(s.median),
        "ci": "-" if s.ci_low is None else f"{fmt_seconds(s.ci_low)} .. {fmt_seconds(s.ci_high)}",
        "iqr": f"{s.iqr / s.median:.1%}",
        "p90": fmt_seconds(s.p90),
        "n_block": f"{s.n} x {r.block_size}",
        "throughput": fmt_rate(r.throughput, r.throughput_unit),
        "flops": "-" if r.flops_per_s is None else fmt_rate(r.flops_per_s, "FLOP/s"),
        "peak": "-" if r.peak_fraction is None else f"{r.peak_fraction:.0%}",
        "memory": ("-" if mem is None else "+" + fmt_bytes(mem)) + ("" if cuda is None else f" / CUDA {fmt_bytes(cuda)}"),
    }
