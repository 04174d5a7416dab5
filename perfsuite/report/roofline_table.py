"""The roofline's console table: the kernel families that took the most time, each against its roof."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from perfsuite.core.units import fmt_rate, fmt_seconds
from perfsuite.roofline.metrics import PIPE_LABEL


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def top_table(groups, ceilings, total_time: float, n: int = 10):
    """The console's table of the kernel families that took the most time."""
    t = Table(title=f"top {min(n, len(groups))} of {len(groups)} kernel families by time")
    for col in (
        "#",
        "kernel family",
        "launches",
        "time",
        "share",
        "FLOPs",
        "FLOP/B",
        "FLOP/s",
        "pipe",
        "% of roof",
        "limiter",
    ):
        t.add_column(col, justify="left" if col in ("kernel family", "pipe", "limiter") else "right")
    for i, p in enumerate(groups[:n], 1):
        v = ceilings.judge(p)
        flops = ("≥" if not p.exact else "") + _num(p.flops)
        t.add_row(
            str(i),
            Text(p.kernel),
            str(p.launches),
            fmt_seconds(p.time_s),
            f"{100 * p.time_s / total_time:.1f}%",
            flops,
            _num(p.intensity),
            fmt_rate(p.flop_per_s or 0.0, "FLOP/s"),
            PIPE_LABEL.get(p.pipe, p.pipe) or "none",
            _num(v.pct, ".1f") if p.exact else "unknown",
            v.limiter or "-",
        )
    return t
