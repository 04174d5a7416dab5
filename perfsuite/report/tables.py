"""Rich tables for the terminal: run summaries and comparisons."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from perfsuite.compare.records import Comparison
from perfsuite.core.record import Record
from perfsuite.core.text import printable
from perfsuite.core.units import fmt_seconds
from perfsuite.report.cells import record_cells, shows_bound


def records_table(records: list[Record]) -> Table:
    t = Table(
        title="perfsuite results",
        show_lines=False,
        caption_justify="left",
        caption="median: seconds per step; 95% CI: of that median; IQR: spread of the timed blocks, as a "
        "share of the median; n x block: timed blocks x steps in each; peak RSS (region): host "
        "memory the step added above its start; CI target: whether the CI reached --target-ci "
        "(a miss is not a failure: its warning says what to do next)",
    )
    bound = shows_bound(records)  # CPU-only runs get no column of "n/a"
    # "CI target": whether the median's interval reached --target-ci ("not met" is not a failure:
    # the warning under the table says what to do next); "met, warnings": reached, with warnings.
    cols = (
        ["case", "median", "95% CI", "IQR", "n x block", "throughput", "FLOP/s", "of peak", "peak RSS (region)"]
        + (["GPU"] if bound else [])
        + ["CI target"]
    )
    for col in cols:
        t.add_column(col, justify="left" if col == "case" else "right")
    for r in records:
        c = record_cells(r)
        t.add_row(
            Text(printable(r.label())),  # Text: the label's [k=v] must not be read as rich markup
            c["median"],
            c["ci"],
            c["iqr"],
            c["n_block"],
            c["throughput"],
            c["flops"],
            c["peak"],
            c["memory"],
            *([c["bound"]] if bound else []),
            ("met" if not r.warnings else "met, warnings") if r.converged else Text("not met", style="yellow"),
        )
    return t


_STYLE = {"slower": "bold red", "faster": "green", "same": "", "undecided": "yellow"}


def comparison_table(cmp: Comparison) -> Table:
    t = Table(
        title="perfsuite compare (new / base)",
        caption_justify="left",
        caption="ratio: new / base (per reference-kernel time when machine is shown, the reference's own "
        "new / base); noise: what separate runs of unchanged code differ by; verdict: slower (exit 1), "
        "faster or same (0), undecided (5: more time or a quieter machine); change: what the work "
        "signatures say (the operators each step dispatched): more, less or other work is exact",
    )
    for col in ("case", "base", "new", "machine", "ratio", "95% CI", "noise", "p", "verdict", "change"):
        t.add_column(col, justify="left" if col == "case" else "right")
    for c in cmp.cases:
        # machine: new / base of the reference kernel's time (perfsuite.measuring.reference); the ratio
        # is then per reference time, so it is not new / base of the two seconds beside it.
        # noise: what separate runs of unchanged code differ by (compare.records.noise_band)
        t.add_row(
            Text(printable(c.label)),
            fmt_seconds(c.base_median_s),
            fmt_seconds(c.new_median_s),
            f"{c.machine:.3f}" if c.machine else "-",
            f"{c.ratio:.3f}",
            f"{c.ci_low:.3f}..{c.ci_high:.3f}",
            f"±{c.noise:.1%}" if c.noise else "-",
            f"{c.p_value:.2g}",
            Text(c.verdict, style=_STYLE[c.verdict] or ""),
            Text(printable(c.what_changed())),
        )
    return t


def print_warnings(console: Console, records: list[Record]) -> None:
    for r in records:
        for w in r.warnings:
            console.print(Text("warning ", style="yellow") + Text(printable(f"{r.label()}: {w}")))


def print_bounds(console: Console, records: list[Record]) -> None:
    """One plain line per CUDA record: where its time went, and on what evidence."""
    for r in records:
        b = r.bound
        if r.device.startswith("cuda"):
            style = "yellow" if b.verdict in ("host-bound", "unknown") else ""
            console.print(Text(f"{b.verdict} ", style=style) + Text(printable(f"{r.label()}: {b.reason}")))


def print_instructions(console: Console, records: list[Record]) -> None:
    """One line per record counted with --instructions: per step, and FLOPs per instruction beside
    the FLOP/s of the table (how much of what the CPU executes is arithmetic); or why not counted."""
    for r in records:
        ins = r.instructions
        if not ins:
            continue
        if ins["status"] != "ok":
            console.print(Text(f"instructions {r.label()}: not counted: {ins.get('reason')}", style="yellow"))
            continue
        flops = r.work.flops_per_step
        per = f", {flops / ins['per_step']:.2f} FLOPs per instruction" if flops else ""
        console.print(
            Text(
                printable(
                    f"instructions {r.label()}: {ins['per_step']:,.0f} per step{per} "
                    f"({ins['method']}, {ins['steps']} steps, {ins.get('seconds')} s)"
                )
            )
        )
