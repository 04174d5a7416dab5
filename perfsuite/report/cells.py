"""A record's figures as display strings, shared by the console table and the markdown page."""

from __future__ import annotations

from perfsuite.core.record import Record
from perfsuite.core.text import markdown_cell
from perfsuite.core.units import fmt_bytes, fmt_rate, fmt_seconds


def _peak_cell(r: Record) -> str:
    frac = r.peak_fraction
    if frac is None:
        return "-"
    roof = (r.peak or {}).get("roof")
    # Name the roof where it is not the work's own dtype (CUDA fp32 judged against tf32).
    return f"{frac:.0%}" if roof in (None, r.work.dtype) else f"{frac:.0%} of {roof}"


def shows_bound(records: list[Record]) -> bool:
    """Whether a table needs the host/device-bound column: only CUDA records have a verdict."""
    return any(r.device.startswith("cuda") for r in records)


def energy_of(r: Record) -> dict | None:
    """The record's energy over its timed region (perfsuite.measuring.energy), when it was read."""
    e = r.conditions.get("energy") or {}
    return e if e.get("status") == "ok" and e.get("per_step_j") else None


def energy_cell(r: Record) -> str:
    e = energy_of(r)
    if e is None:
        return "-"
    per = f" ({e['items_per_j']:.3g} {r.work.item_unit}/J)" if e.get("items_per_j") else ""
    return f"{e['per_step_j']:.3g} J/step{per}, {e['source']}"


def record_cells(r: Record) -> dict[str, str]:
    s = r.stats
    mem = r.memory.get("host_peak_delta_bytes")
    cuda = r.memory.get("cuda_max_allocated_bytes")
    return {
        "median": fmt_seconds(s.median),
        "ci": "-" if s.ci_low is None or s.ci_high is None else f"{fmt_seconds(s.ci_low)} .. {fmt_seconds(s.ci_high)}",
        "iqr": f"{s.iqr / s.median:.1%}",
        "p90": fmt_seconds(s.p90),
        "n_block": f"{s.n} x {r.block_size}",
        "throughput": fmt_rate(r.throughput, r.throughput_unit),
        "flops": "-" if r.flops_per_s is None else fmt_rate(r.flops_per_s, "FLOP/s"),
        "peak": _peak_cell(r),
        "bound": r.bound.cell(),
        "memory": ("-" if mem is None else "+" + fmt_bytes(mem))
        + ("" if cuda is None else f" / CUDA {fmt_bytes(cuda)}"),
    }


def markdown_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table from display cells, rendered by pandas (DataFrame.to_markdown, tabulate).
    Every cell is already display text (tabulate must not parse "1.10x" or "12" as numbers), and
    cells from data files (names, parameters) lose control characters and escape "|"."""
    import pandas as pd

    cells = [[markdown_cell(c) for c in row] for row in rows]
    return pd.DataFrame(cells, columns=columns).to_markdown(index=False, disable_numparse=True).splitlines()
