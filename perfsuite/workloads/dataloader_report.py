"""DataLoader sweep analysis: the knee point, a recommendation, and throughput vs workers."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from perfsuite.core.record import Record
from perfsuite.report.cells import markdown_table
from perfsuite.storage.write import save_figure

KNEE_FRACTION = 0.95  # "within 5% of the best throughput"


def _cost(r: Record) -> tuple:
    """Smaller is a cheaper configuration: fewer workers, then smaller batches and prefetch."""
    p = r.params
    return (
        p.get("num_workers", 0),
        p.get("batch_size", 0),
        p.get("prefetch_factor", 0),
        bool(p.get("persistent_workers")),
        bool(p.get("pin_memory")),
    )


def knee(records: list[Record]) -> tuple[Record, Record]:
    """(best, knee): the fastest case, and the cheapest case within 5% of its throughput."""
    best = max(records, key=lambda r: r.throughput)
    near = [r for r in records if r.throughput >= KNEE_FRACTION * best.throughput]
    return best, min(near, key=_cost)


def throughput_vs_workers(records: list[Record], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    lines: dict = defaultdict(list)
    for r in records:
        lines[r.params.get("batch_size")].append((r.params.get("num_workers", 0), r.throughput))
    # A Figure of its own, not pyplot's: nothing to close, and none left open when drawing raises
    # (a report of hostile records left 20 open, and every later figure warned: an error).
    fig = Figure(figsize=(6.5, 4))
    ax = fig.subplots()
    for bs, pts in sorted(lines.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"batch {bs}")
    ax.set_xlabel("num_workers")
    ax.set_ylabel("images/s (median epoch)")
    ax.set_title("DataLoader throughput")
    ax.legend()
    ax.grid(alpha=0.3)

    save_figure(fig, path, dpi=110, bbox_inches="tight")
    return path


def section(records: list[Record], out_dir: Path) -> list[str]:
    best, k = knee(records)
    base = [r for r in records if r.params.get("num_workers") == 0]
    fig = throughput_vs_workers(records, Path(out_dir) / "dataloader-workers.png")

    def cfg(r: Record) -> str:
        return ", ".join(
            f"{key}={r.params[key]}"
            for key in ("num_workers", "batch_size", "prefetch_factor", "persistent_workers", "pin_memory")
            if key in r.params
        )

    lines = [
        "### DataLoader sweep",
        "",
        f"![throughput against workers]({fig.name})",
        "",
        f"- best: {cfg(best)} at {best.throughput:,.0f} images/s",
        f"- knee (cheapest within 5% of the best): {cfg(k)} at {k.throughput:,.0f} images/s",
    ]
    if base:
        b0 = max(base, key=lambda r: r.throughput)
        lines.append(
            f"- against num_workers=0 ({b0.throughput:,.0f} images/s): best x{best.throughput / b0.throughput:.2f}"
        )
    lines += [f"- recommendation: `{cfg(k).replace(', ', ' ')}`", ""]
    waits = [r for r in records if "data_wait_fraction" in r.extra]
    if waits:
        lines += markdown_table(
            ["config", "model waits on data"], [[cfg(r), f"{r.extra['data_wait_fraction']:.0%}"] for r in waits]
        ) + [""]
    return lines
