"""Distributed cases in the report: DDP scaling with the communication share beside it, and
collective bandwidth (perfsuite.distributed; README "Distributed")."""

from __future__ import annotations

from perfsuite.core.record import Record
from perfsuite.core.units import fmt_bytes, fmt_rate, fmt_seconds
from perfsuite.report.cells import markdown_table

WORLD_KEYS = ("world_size", "nnodes")


def _same_case(r: Record) -> tuple:
    return (r.workload, r.device, tuple(sorted((k, v) for k, v in r.params.items() if k not in WORLD_KEYS)))


def efficiency(r: Record, records: list[Record]) -> tuple[float | None, str]:
    """Scaling efficiency of `r` and where it came from: the record's own (against world_size=1
    measured earlier in the same run), else against a world_size=1 record of these records."""
    scale = r.extra.get("scaling")
    if scale:
        return scale["efficiency"], "same run"
    w = r.extra.get("world_size")
    if not w:
        return None, ""
    if w == 1:
        return 1.0, "baseline"
    bases = [b for b in records if b.extra.get("world_size") == 1 and _same_case(b) == _same_case(r)]
    if not bases:
        return None, ""
    base = max(bases, key=lambda b: b.created)
    return r.throughput / (w * base.throughput), "report"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def scaling_section(records: list[Record]) -> list[str]:
    recs = [r for r in records if "world_size" in r.extra and "bus_factor" not in r.extra]  # not collectives
    if not recs:
        return []
    lines = [
        "### Scaling over ranks",
        "",
        "Step = the slowest rank's median; throughput = all ranks' images per second; efficiency = "
        "throughput / (world_size x the world_size=1 throughput). Communication from one profiled step: "
        "share of the step with a collective in flight, the part not overlapped with compute (exposed), "
        "and how much of it DDP overlapped.",
        "",
    ]
    rows = []
    for r in sorted(recs, key=lambda r: (_same_case(r), r.extra["world_size"])):
        e = r.extra
        case = ", ".join(f"{k}={v}" for k, v in r.params.items() if k not in WORLD_KEYS + ("backend",) and v != "")
        eff, source = efficiency(r, records)
        eff_txt = "-" if eff is None else f"{eff:.0%}" + (" (from the report's records)" if source == "report" else "")
        comm = e.get("comm") or {}
        rows.append(
            [
                case,
                str(e["world_size"]),
                str(e.get("nnodes", 1)),
                str(e.get("backend")),
                fmt_seconds(r.median_s),
                fmt_rate(r.throughput, r.throughput_unit),
                eff_txt,
                _pct(comm.get("comm_share")),
                _pct(comm.get("exposed_comm_share")),
                _pct(comm.get("overlapped_fraction")),
                f"{e.get('rank_spread', 0):.1%}",
            ]
        )
    cols = [
        "case",
        "world_size",
        "nnodes",
        "backend",
        "step",
        "throughput",
        "efficiency",
        "comm share",
        "exposed comm",
        "overlapped",
        "rank spread",
    ]
    return lines + markdown_table(cols, rows) + [""]


def collectives_section(records: list[Record]) -> list[str]:
    recs = [r for r in records if "busbw_Bps" in r.extra]
    if not recs:
        return []
    lines = [
        "### Collective bandwidth",
        "",
        "nccl-tests' definitions: algbw = bytes / time (the slowest rank's median); busbw = algbw x 2(n-1)/n "
        "for all_reduce, x (n-1)/n for all_gather and reduce_scatter.",
        "",
    ]
    rows = []
    for r in sorted(
        recs, key=lambda r: (r.params.get("op"), r.params.get("dtype"), r.extra["world_size"], r.extra["bytes"])
    ):
        e = r.extra
        rows.append(
            [
                str(e["op"]),
                str(r.params.get("dtype")),
                fmt_bytes(e["bytes"]),
                str(e["world_size"]),
                str(e.get("backend")),
                fmt_seconds(r.median_s),
                fmt_rate(e["algbw_Bps"], "B/s"),
                fmt_rate(e["busbw_Bps"], "B/s"),
            ]
        )
    cols = ["op", "dtype", "bytes", "world_size", "backend", "time", "algbw", "busbw"]
    return lines + markdown_table(cols, rows) + [""]


def section(records: list[Record]) -> list[str]:
    return scaling_section(records) + collectives_section(records)
