"""A history by instruction count as one static HTML page: instructions per step by commit (an
inline SVG, no script, no network), the commits that moved it past the threshold marked, and a table
of every commit. Every text from a repository is escaped."""

from __future__ import annotations

from perfsuite.compare.count_walk import CountHistory, CountPoint
from perfsuite.measuring.instructions import described
from perfsuite.report.history_page import esc

W, H, PAD = 900, 300, 60


def _svg(state: CountHistory) -> str:
    pts = [(i, p) for i, p in enumerate(state.points) if p.per_step is not None]
    if not pts:
        return "<p>No commit counted yet.</p>"
    values = [p.per_step for _, p in pts if p.per_step is not None]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-4 * hi:  # a flat history: a band of ±0.05% around it, so it is drawn as flat
        lo, hi = lo * 0.9995, hi * 1.0005
    n = len(state.points)

    def x(i: int) -> float:
        return PAD + (i + 0.5) / n * (W - 2 * PAD)

    def y(v: float) -> float:
        return H - PAD - (v - lo) / (hi - lo) * (H - 2 * PAD)

    line = " ".join(f"{x(i):.1f},{y(p.per_step):.1f}" for i, p in pts if p.per_step is not None)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
        'aria-label="instructions per step by commit">',
        f'<text x="{PAD}" y="20" font-size="13">instructions per step (oldest commit left)</text>',
        f'<text x="4" y="{y(hi) + 4:.1f}" font-size="11">{hi:,.0f}</text>',
        f'<text x="4" y="{y(lo) + 4:.1f}" font-size="11">{lo:,.0f}</text>',
        f'<polyline fill="none" stroke="#36c" stroke-width="2" points="{line}"/>',
    ]
    for i, p in pts:
        assert p.per_step is not None
        moved = p.moved is not None and abs(p.moved) > state.threshold
        colour = ("#c00" if (p.moved or 0) > 0 else "#080") if moved else "#36c"
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(p.per_step):.1f}" r="{6 if moved else 3}" fill="{colour}">'
            f"<title>{esc(p.sha[:12])} {esc(p.subject)}: {p.per_step:,.0f}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _by_time(p: CountPoint) -> str:
    """A flagged commit's gate by time, as the console says it (GateVerdict.describe: the word and
    ratio from the verdict's pairs), or why it was not gated; empty for a commit not flagged."""
    if p.by_time is not None:
        return p.by_time.describe()
    return p.by_time_note


def write_count_page(state: CountHistory) -> str:
    title = f"instructions per step of {state.workload} on {state.device}, by commit"
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}tr.more{background:#fee}"
        "tr.fewer{background:#efe}tr.skipped{color:#777}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>parameters {esc(state.params)}; each commit counted once {esc(described(state.counter))}, "
        "with no interval, against the last counted commit before it; "
        f"marked: a move past {state.threshold:.2%}. {esc(state.summary())}. A count sees work, not time: "
        "a slower kernel or a memory-bound step with the same instructions does not move it "
        "(docs/work-count.md).</p>",
        _svg(state),
        "<table><tr><th>commit</th><th>subject</th><th>instructions per step</th><th>move</th>"
        "<th>by time against its parent</th></tr>",
    ]
    for p in state.points:
        if p.per_step is None:
            out.append(
                f'<tr class="skipped"><td><code>{esc(p.sha[:12])}</code></td><td>{esc(p.subject)}</td>'
                f"<td colspan=3>not counted: {esc(p.reason)}</td></tr>"
            )
            continue
        flagged = p.moved is not None and abs(p.moved) > state.threshold
        cls = (' class="more"' if (p.moved or 0) > 0 else ' class="fewer"') if flagged else ""
        move = "" if p.moved is None else f"{p.moved:+.3%}"
        out.append(
            f"<tr{cls}><td><code>{esc(p.sha[:12])}</code></td><td>{esc(p.subject)}</td>"
            f"<td>{p.per_step:,.0f}</td><td>{move}</td><td>{esc(_by_time(p))}</td></tr>"
        )
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"
