"""A markdown summary page with one figure per workload, written from stored records."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError
from perfsuite.core.record import Record
from perfsuite.core.text import markdown_cell, printable
from perfsuite.core.units import fmt_seconds
from perfsuite.report.cells import energy_cell, energy_of, markdown_table, record_cells, shows_bound
from perfsuite.report.plots import throughput_figure
from perfsuite.stats import summary as stats
from perfsuite.storage import table as results
from perfsuite.storage import write


def _table(recs: list[Record]) -> list[str]:
    bound = shows_bound(recs)  # CPU-only workloads get no column of "n/a"
    joules = any(energy_of(r) is not None for r in recs)  # nor one of "-" where no counter was read
    cols = (
        ["params", "median", "95% CI", "IQR/median", "p90", "n x block", "throughput", "FLOP/s", "of peak", "peak mem"]
        + (["GPU"] if bound else [])
        + (["energy"] if joules else [])
        + ["converged"]
    )
    rows = []
    for r in recs:
        c = record_cells(r)
        rows.append(
            [
                ", ".join(f"{k}={v}" for k, v in r.params.items()) or "-",
                c["median"],
                c["ci"],
                c["iqr"],
                c["p90"],
                c["n_block"],
                c["throughput"],
                c["flops"],
                c["peak"],
                c["memory"],
            ]
            + ([c["bound"]] if bound else [])
            + ([energy_cell(r)] if joules else [])
            + ["yes" if r.converged else "**no**"]
        )
    return markdown_table(cols, rows)


def _notes(recs: list[Record]) -> list[str]:
    """Where each CUDA record's time went, and why a record with a stored peak has no fraction."""
    lines = [
        f"- {printable(r.label())}: **{r.bound.verdict}**: {r.bound.reason}"
        for r in recs
        if r.device.startswith("cuda")
    ]
    lines += [
        f"- {printable(r.label())}: no fraction of peak: {r.peak['why']}"
        for r in recs
        if r.peak and r.peak_fraction is None and r.flops_per_s is not None and r.peak.get("why")
    ]
    return ["Where the time went, and roofs:", "", *lines, ""] if lines else []


def _amp_section(amp: list) -> list[str]:
    """perfsuite.compare.amp.AmpComparison's, each figure computed from its pairs and losses."""
    rows = []
    for a in amp:
        ci = a.speedup_ci
        rows.append(
            [
                a.workload,
                str(a.params),
                a.precision_a,
                a.precision_b,
                fmt_seconds(stats.median(a.time_a_s)),
                fmt_seconds(stats.median(a.time_b_s)),
                f"{a.speedup:.2f}x" + (f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else ""),
                f"{a.memory_ratio:.2f}",
                f"{a.final_loss_a:.4g} / {a.final_loss_b:.4g}",
                f"{a.bound_a.cell()} / {a.bound_b.cell()}",
                "ok" if a.accuracy_ok else "**diverged**",
            ]
        )
    cols = [
        "workload",
        "params",
        "A",
        "B",
        "step A",
        "step B",
        "speed-up (95% CI)",
        "saved-for-backward B/A",
        "final loss A / B",
        "GPU A / B",
        "verdict",
    ]
    return ["## Precision comparisons (interleaved in one process)", "", *markdown_table(cols, rows), ""]


def _pair_section(pairs: list) -> list[str]:
    """perfsuite.compare.pair.PairResult's, each ratio computed from its pairs."""
    rows = []
    for p in pairs:
        ci = p.time_ratio_ci
        rows.append(
            [
                p.workload,
                ", ".join(f"{k}={v}" for k, v in p.params.items()),
                f"{p.vary}: {p.a} / {p.b}",
                f"{p.time_ratio:.3f}" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else ""),
                str(len(p.ratios)),
                "-" if p.saved_ratio is None else f"{p.saved_ratio:.2f}",
            ]
        )
    cols = ["workload", "shared params", "A / B", "time ratio A/B (95% CI)", "pairs", "saved for backward A/B"]
    return ["## Paired comparisons (interleaved in one process)", "", *markdown_table(cols, rows), ""]


def _section(workload: str):
    """The report section the workload declares (its file's `report=`), if it is known here."""
    try:
        return registry.get(workload).report
    except ConfigError:  # records of a workload not loaded in this process: its table only
        return None


def write_report(
    records: list[Record],
    out_dir: Path,
    sources: list[Path] | None = None,
    amp: list | None = None,
    pairs: list | None = None,
    latency_bound_ms: float | None = None,
    why: list | None = None,
    not_timed: list[str] | None = None,
    variants: list | None = None,
) -> Path:
    """summary.md and its figures; `not_timed` (what the results say was not timed, and why) comes
    first, where a reader of a run that exited non-zero looks."""
    out_dir = Path(out_dir)
    write.make_dir(out_dir, "report folder")
    by_workload: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_workload[r.workload].append(r)
    env = records[0].env
    tidy = out_dir / "results.csv"
    write.save_csv(results.frame(records), tidy)
    lines = [
        "# perfsuite report",
        "",
        f"Generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from "
        + (", ".join(f"`{s}`" for s in sources) if sources else "stored records")
        + ".",
        "",
        printable(
            f"- device: {records[0].device}; CPU: {env.get('cpu_model')}; torch {env.get('torch')} "
            f"with {env.get('torch_threads')} threads; git {str(env.get('git_commit'))[:10]}"
            + (" (dirty)" if env.get("git_dirty") else "")
        ),
        f"- timing: {printable(records[0].timing_method)}; memory: peak RSS of the timed region above its start",
        f"- every case as one tidy table: [`results.csv`]({tidy.name}) (`perfsuite export csv|parquet` writes "
        "the same from any results)",
        "",
    ]
    if not_timed:
        lines += ["## Not timed", "", *(f"- {printable(t)}" for t in not_timed), ""]
    for workload, recs in by_workload.items():
        # The workload's name is data: slugged and kept inside out_dir (`../../x` writes out_dir/x.png).
        fig = throughput_figure(recs, write.file_in(out_dir, workload, ".png"))
        lines += [
            f"## {printable(workload)}",
            "",
            f"![{markdown_cell(workload)} throughput]({fig.name})",
            "",
            *_table(recs),
            "",
            *_notes(recs),
        ]
        section = _section(workload)
        if section is not None:  # qwen's study, dataloader's knee, the distributed scaling...
            lines += section(recs, out_dir, {"latency_bound_ms": latency_bound_ms})
        warns = [f"- {printable(r.label())}: {printable(w)}" for r in recs for w in r.warnings]
        if warns:
            lines += ["Warnings:", "", *warns, ""]
    if amp:
        lines += _amp_section(amp)
    if pairs:
        lines += _pair_section(pairs)
    if variants:  # variant studies (perfsuite variants)
        from perfsuite.report import variants_section

        lines += variants_section.section(variants, out_dir)
    if why:  # differential profiles (perfsuite why, bisect)
        from perfsuite.report.why_section import section as why_section

        lines += why_section(why)
    page = out_dir / "summary.md"
    write.write_text(page, "\n".join(lines))
    return page
