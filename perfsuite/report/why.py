"""The report's section for differential profiles (`perfsuite why --json`, and bisect's)."""

from __future__ import annotations

from pathlib import Path

from perfsuite.core.text import markdown_cell
from perfsuite.core.units import fmt_bytes, fmt_seconds

ROWS = 10  # operators per comparison in the report; the JSON keeps the command's --top


def _us(x: float) -> str:
    return ("-" if x < 0 else "") + fmt_seconds(abs(x) * 1e-6)


def section(docs: list[dict]) -> list[str]:
    """Markdown lines: per comparison, the step times, what the listed operators explain, the top
    operators by their share of the difference, and peak memory."""
    from perfsuite.compare.why import WhyResult

    lines = ["## Why: operators that changed (differential torch.profiler)", ""]
    for d in docs:
        try:
            r = WhyResult.from_dict(d)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a hand-edited or foreign file
            lines += [f"- a why document that cannot be read: {type(exc).__name__}: {markdown_cell(str(exc))}", ""]
            continue
        ta, tb = r.a.median_step_s, r.b.median_step_s
        explained = "-" if r.explained is None else f"{r.explained:.0%}"
        what = "self CUDA" if r.metric == "self_device_us" else "self CPU"
        lines += [f"### {markdown_cell(r.workload)} ({markdown_cell(r.how)}, {markdown_cell(r.device)})", "",
                  f"A = {markdown_cell(r.a.label)}, B = {markdown_cell(r.b.label)}: step {fmt_seconds(ta)} / {fmt_seconds(tb)} "
                  f"({tb / ta - 1:+.1%}); the operators listed in the JSON explain {explained} of the difference.",
                  "", f"| operator | input shapes | A ({what}) | B | B - A | calls A/B | alloc B - A | |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in r.listed[:ROWS]:
            alloc = "" if not row.delta_bytes else ("-" if row.delta_bytes < 0 else "+") + fmt_bytes(abs(row.delta_bytes))
            lines.append(f"| `{markdown_cell(row.name)}` | {markdown_cell(row.shapes)} | {_us(row.value(row.a, r.metric))} | "
                         f"{_us(row.value(row.b, r.metric))} | {_us(row.delta_us)} | "
                         f"{row.value(row.a, 'calls'):g}/{row.value(row.b, 'calls'):g} | {alloc} | {row.mark} |")
        mem = r.memory_delta_bytes
        if mem is not None:
            lines += ["", f"Peak memory of a step above its start: B - A {'-' if mem < 0 else '+'}{fmt_bytes(abs(mem))}"
                      + (f"; allocations grew in {', '.join(f'`{g.name}`' for g in r.grew[:3])}" if r.grew else "")
                      + "."]
        lines += [f"- note: {n}" for n in r.notes] + [""]
    return lines


def write_page(docs: list[dict], out_dir: Path, sources: list[Path]) -> Path:
    """A report of differential profiles alone (no records among the inputs)."""
    from perfsuite.storage import write

    page = write.inside(write.make_dir(out_dir, "--out-dir"), "summary.md")
    write.write_text(page, "\n".join(["# perfsuite report", "",
                                      "From " + ", ".join(f"`{markdown_cell(str(s))}`" for s in sources) + ".", "",
                                      *section(docs)]))
    return page
