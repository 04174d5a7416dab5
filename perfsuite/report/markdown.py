"""A markdown summary page with one figure per workload, written from stored records."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from perfsuite.stats import summary as stats
from perfsuite.storage import table as results
from perfsuite.measure.bound import where_time_went
from perfsuite.core.record import Record
from perfsuite.report.cells import record_cells, shows_bound
from perfsuite.report.plots import throughput_figure
from perfsuite.core.units import fmt_seconds
from perfsuite.core.text import markdown_cell, printable
from perfsuite.storage import write


def _row(r: Record, bound: bool) -> str:
    c = record_cells(r)
    params = markdown_cell(", ".join(f"{k}={v}" for k, v in r.params.items()) or "-")
    conv = "yes" if r.converged else "**no**"
    gpu = f" {c['bound']} |" if bound else ""
    return (f"| {params} | {c['median']} | {c['ci']} | {c['iqr']} | {c['p90']} | {c['n_block']} | "
            f"{c['throughput']} | {c['flops']} | {c['peak']} | {c['memory']} |{gpu} {conv} |")


def _table(recs: list[Record]) -> list[str]:
    bound = shows_bound(recs)  # CPU-only workloads get no column of "n/a"
    cols = ["params", "median", "95% CI", "IQR/median", "p90", "n x block", "throughput", "FLOP/s", "of peak",
            "peak mem"] + (["GPU"] if bound else []) + ["converged"]
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols), *[_row(r, bound) for r in recs]]


def _notes(recs: list[Record]) -> list[str]:
    """Where each CUDA record's time went, and why a record with a stored peak has no fraction."""
    lines = [f"- {printable(r.label())}: **{r.bound.verdict}**: {r.bound.reason}" for r in recs if r.device.startswith("cuda")]
    lines += [f"- {printable(r.label())}: no fraction of peak: {r.peak['why']}" for r in recs
              if r.peak and r.peak_fraction is None and r.flops_per_s is not None and r.peak.get("why")]
    return ["Where the time went, and roofs:", "", *lines, ""] if lines else []


def _amp_bound(a: dict, side: str) -> str:
    """One side's verdict from the comparison's NVML summary (files written before it had none: "-")."""
    if f"nvml_{side}" not in a:
        return "-"
    return where_time_went(a["device"], a[f"nvml_{side}"]).cell()


def _amp_section(amp: list[dict]) -> list[str]:
    lines = ["## Precision comparisons (interleaved in one process)", "",
             "| workload | params | A | B | step A | step B | speed-up (95% CI) | saved-for-backward B/A | final loss A / B | GPU A / B | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for a in amp:
        ci = a.get("speedup_ci")
        ci_txt = f"{a['speedup']:.2f}x" + (f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else "")
        ta = stats.median(a["time_a_s"])
        tb = stats.median(a["time_b_s"])
        lines.append(
            f"| {markdown_cell(a['workload'])} | {markdown_cell(a['params'])} | {markdown_cell(a['precision_a'])} | {markdown_cell(a['precision_b'])} | {fmt_seconds(ta)} | "
            f"{fmt_seconds(tb)} | {ci_txt} | {a['memory_ratio']:.2f} | {a['final_loss_a']:.4g} / {a['final_loss_b']:.4g} | "
            f"{_amp_bound(a, 'a')} / {_amp_bound(a, 'b')} | {'ok' if a['accuracy_ok'] else '**diverged**'} |")
    return lines + [""]


def _pair_section(pairs: list[dict]) -> list[str]:
    lines = ["## Paired comparisons (interleaved in one process)", "",
             "| workload | shared params | A / B | time ratio A/B (95% CI) | pairs | saved for backward A/B |",
             "|---|---|---|---|---|---|"]
    for p in pairs:
        ci = p.get("time_ratio_ci")
        ci_txt = f"{p['time_ratio']:.3f}" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else "")
        shared = markdown_cell(", ".join(f"{k}={v}" for k, v in p["params"].items()))
        saved = "-" if p.get("saved_ratio") is None else f"{p['saved_ratio']:.2f}"
        lines.append(f"| {markdown_cell(p['workload'])} | {shared} | {markdown_cell(p.get('vary'))}: {markdown_cell(p['a'])} / {markdown_cell(p['b'])} | {ci_txt} | "
                     f"{len(p['ratios'])} | {saved} |")
    return lines + [""]


def write_report(records: list[Record], out_dir: Path, sources: list[Path] | None = None,
                 amp: list[dict] | None = None, pairs: list[dict] | None = None,
                 latency_bound_ms: float | None = None) -> Path:
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
        + (", ".join(f"`{s}`" for s in sources) if sources else "stored records") + ".",
        "",
        printable(f"- device: {records[0].device}; CPU: {env.get('cpu_model')}; torch {env.get('torch')} "
                  f"with {env.get('torch_threads')} threads; git {str(env.get('git_commit'))[:10]}"
                  + (" (dirty)" if env.get("git_dirty") else "")),
        f"- timing: {printable(records[0].timing_method)}; memory: peak RSS of the timed region above its start",
        f"- every case as one tidy table: [`results.csv`]({tidy.name}) (`perfsuite export csv|parquet` writes "
        "the same from any results)",
        "",
    ]
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
        if workload == "qwen":
            from perfsuite.report.qwen import section as qwen_section

            lines += qwen_section(recs, out_dir, latency_bound_ms)
        if workload == "dataloader" and len(recs) > 1:
            from perfsuite.report.dataloader import section

            lines += section(recs, out_dir)
        if any("world_size" in r.extra for r in recs):  # ddp, allreduce: scaling and bandwidth
            from perfsuite.report.distributed import section as distributed_section

            lines += distributed_section(recs)
        warns = [f"- {printable(r.label())}: {printable(w)}" for r in recs for w in r.warnings]
        if warns:
            lines += ["Warnings:", "", *warns, ""]
    if amp:
        lines += _amp_section(amp)
    if pairs:
        lines += _pair_section(pairs)
    page = out_dir / "summary.md"
    write.write_text(page, "\n".join(lines))
    return page
