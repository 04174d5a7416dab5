"""The report's section for differential profiles (`perfsuite why --json`, and bisect's).

It says what `perfsuite why` printed (perfsuite.cli.why): the figures come from the result as the
document is read (perfsuite.compare.why.WhyResult: its sides), not from the derived fields stored
beside them, so a document written before rows kept their windows or before the step difference was
measured from pairs renders with the figures the current `why` gives those sides.
"""

from __future__ import annotations

from pathlib import Path

from perfsuite.compare.why import WhyResult
from perfsuite.compare.why_rows import ROW_CONFIDENCE
from perfsuite.core.text import markdown_cell
from perfsuite.core.units import fmt_bytes, fmt_seconds
from perfsuite.storage import write

ROWS = 10  # operators per comparison in the report; the JSON keeps the command's --top


def _us(x: float) -> str:
    return fmt_seconds(x * 1e-6)


def _signed_us(x: float) -> str:
    return ("-" if x < 0 else "+") + _us(abs(x))


def _step_line(r) -> str:
    return f"A = {markdown_cell(r.a.label)}, B = {markdown_cell(r.b.label)}: {r.step_summary()}."


def _table(r) -> list[str]:
    """The first ROWS operators, those outside their own noise first; a row within it is marked
    "within" (its difference is as likely the windows' noise as the change)."""
    what = "self CUDA" if r.metric == "self_device_us" else "self CPU"
    lines = [
        f"Operators per step, those outside their own noise first, then by |B - A| ({what} time; "
        f"{r.rounds} windows of {r.steps} steps per side; ± is the {ROW_CONFIDENCE:.0%} interval from "
        "the windows' spread, empty where the document kept no windows):",
        "",
        f"| operator | input shapes | A ({what}) | B | B - A | ± | calls A/B | alloc B - A | | noise |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r.listed[:ROWS]:
        alloc = "" if not row.delta_bytes else ("-" if row.delta_bytes < 0 else "+") + fmt_bytes(abs(row.delta_bytes))
        noise = "" if row.noise_us is None else _us(row.noise_us)
        calls = f"{row.value(row.a, 'calls'):g}/{row.value(row.b, 'calls'):g}"
        lines.append(
            f"| `{markdown_cell(row.name)}` | {markdown_cell(row.shapes)} | "
            f"{_us(row.value(row.a, r.metric))} | {_us(row.value(row.b, r.metric))} | "
            f"{_signed_us(row.delta_us)} | {noise} | {calls} | {alloc} | {row.mark} | "
            f"{'within' if row.within_noise else ''} |"
        )
    return lines


def _comparison(r) -> list[str]:
    lines = [
        f"### {markdown_cell(r.workload)} ({markdown_cell(r.how)}, {markdown_cell(r.device)})",
        "",
        _step_line(r),
        "",
        f"Kind of change: {markdown_cell(r.kind_said())}.",
        "",
        *_table(r),
        "",
        # The sentence, not a share: a share is only given where the sum is one (WhyResult.explained).
        markdown_cell(r.reconciliation) + ".",
    ]
    mem = r.memory_delta_bytes
    if mem is not None:
        lines += [
            "",
            f"Peak memory of a step above its start: B - A {'-' if mem < 0 else '+'}{fmt_bytes(abs(mem))}"
            + (f"; allocations grew in {', '.join(f'`{g.name}`' for g in r.grew[:3])}" if r.grew else "")
            + ".",
        ]
    return lines + [f"- note: {n}" for n in r.notes] + [""]


def section(results: list[WhyResult]) -> list[str]:
    """Markdown lines: per comparison, the step times and measured difference, the top operators
    with their intervals, how they reconcile with the measured difference, and peak memory."""
    lines = ["## Why: operators that changed (differential torch.profiler)", ""]
    for r in results:
        try:
            # A side's step times are only read here (none: ValueError), and an operator row's fields.
            lines += _comparison(r)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a hand-edited or foreign file
            lines += [f"- a why document that cannot be read: {type(exc).__name__}: {markdown_cell(str(exc))}", ""]
    return lines


def write_page(docs: list[WhyResult], out_dir: Path, sources: list[Path]) -> Path:
    """A report of differential profiles alone (no records among the inputs)."""
    page = write.inside(write.make_dir(out_dir, "--out-dir"), "summary.md")
    write.write_text(
        page,
        "\n".join(
            [
                "# perfsuite report",
                "",
                "From " + ", ".join(f"`{markdown_cell(str(s))}`" for s in sources) + ".",
                "",
                *section(docs),
            ]
        ),
    )
    return page
