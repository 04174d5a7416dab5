"""Variant studies in `perfsuite report`: per case, the table a user compares deployments with,
its chart (perfsuite.report.variants_chart) and the line to act on."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from perfsuite.core.text import markdown_cell, printable
from perfsuite.report.cells import markdown_table
from perfsuite.report.variants_chart import chart
from perfsuite.storage import write

COLUMNS = ["variant", "word", "speed-up (CI)", "p50 ms (eager beside)", "p99 ms", "items/s", "J/step vs eager (CI)", "size MB",
           "build s", "cold s", "top-1", "max rel err", "kept of eager", "holds"]  # fmt: skip


def _num(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def cells(r, no: str = "**no**") -> list[str]:
    """A row's cells under COLUMNS, as the report and the console show them (`no`: how a variant
    below the floor reads)."""
    if r.status != "measured":
        reason = (r.reason or "").strip().splitlines()[:1] or [""]
        return [r.variant, r.status, printable(reason[0][:200]), *["-"] * (len(COLUMNS) - 3)]
    ci = r.speedup_interval
    eager_p50 = r.eager_latency_s.get("p50")
    return [
        r.variant,
        r.word or "baseline",
        f"{r.speedup:.2f}x ({ci[0]:.2f}-{ci[1]:.2f})" if ci and r.speedup else "1",
        _num(r.latency_s.get("p50", 0) * 1e3, ".2f") + (f" ({eager_p50 * 1e3:.2f})" if eager_p50 else ""),
        _num(r.latency_s.get("p99", 0) * 1e3, ".2f"),
        _num(r.items_per_s, ".1f"),
        _energy(r.verdict.energy if r.verdict is not None else None),
        _num(r.size_bytes / 1e6 if r.size_bytes is not None else None, ".1f"),
        _num(r.build_s, ".2f"),
        _num(r.cold_s, ".3f"),
        _num(r.outputs.get("eval_top1", r.outputs.get("top1")), ".3f"),
        _num(r.outputs.get("max_rel"), ".2g"),
        ", ".join(f"{k} {v:.3f}" for k, v in r.kept.items()) or "-",
        {True: "yes", False: no, None: "-"}[r.holds],
    ]


def _energy(e) -> str:
    """Joules per step against eager's, paired (--energy; on by default on CUDA), or "-"."""
    if e is None or not e.ratios:
        return "-"
    lo, hi = e.interval
    return f"{e.ratio:.2f}x ({lo:.2f}-{hi:.2f})"


def section(studies: list, out_dir: Path) -> list[str]:
    """Markdown lines for each study, its chart written into `out_dir`."""
    lines = ["## Variants against eager (interleaved, accuracy held)", ""]
    for s in studies:
        case = ", ".join(f"{k}={v}" for k, v in s.params.items())
        rows = [cells(r) for r in [*([s.eager] if s.eager is not None else []), *s.rows]]
        lines += [f"### {markdown_cell(s.workload)} [{markdown_cell(case)}] on {markdown_cell(s.device)}", ""]
        if s.eager is not None:
            png = chart(s, out_dir)
            lines += [f"![variants of {markdown_cell(s.workload)}]({png.name})", ""]
        lines += [
            *markdown_table(COLUMNS, rows),
            "",
            f"**{markdown_cell(s.closing)}** (floor {s.floor:.0%} of eager)",
            "",
        ]
    return lines


def write_page(studies: list, out_dir: Path, sources: list[Path]) -> Path:
    """summary.md of variant studies alone (no records given)."""
    write.make_dir(out_dir, "report folder")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# perfsuite report", "", f"Generated {when} from " + ", ".join(f"`{s}`" for s in sources) + ".", ""]
    page = out_dir / "summary.md"
    write.write_text(page, "\n".join(lines + section(studies, out_dir)))
    return page
