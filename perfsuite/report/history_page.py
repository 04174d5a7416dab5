"""A history as one static HTML page: the chained trajectory with its band (an inline SVG, no
script, no network), confirmed steps marked and linked to their operators, environment changes
marked, and a table of every commit. Every text from a repository (subjects, operator names,
errors) is escaped."""

from __future__ import annotations

import html
import math

from perfsuite.compare.paired_history import History
from perfsuite.core.text import printable
from perfsuite.core.units import fmt_seconds

W, H, PAD = 900, 320, 50


def esc(text: object) -> str:
    """HTML-escaped, and without control characters: a raw ESC or BEL from a commit subject sat
    in the page's bytes (shown by a terminal that `cat`s it, issue 51)."""
    return html.escape(printable(text), quote=True)


def operator_changes(why: dict | None, n: int = 8) -> list[tuple[str, float]]:
    """The first `n` operators of a stored why (perfsuite.compare.why, sorted by its change) and
    each one's change per step, in its metric's microseconds."""
    rows = (why or {}).get("rows") or []
    key = (why or {}).get("metric", "self_cpu_us")
    out = []
    for r in rows[:n]:
        a, b = r.get("a") or {}, r.get("b") or {}
        out.append((str(r.get("name", "?")), (b.get(key) or 0.0) - (a.get(key) or 0.0)))
    return out


def _svg(state: History, rows: list[dict]) -> str:
    pts = [(i, r) for i, r in enumerate(rows)]
    if not pts:
        return "<p>No commit measured yet.</p>"
    # The axis spans the trajectory and the bounded part of its band; an unbounded band (a point
    # with too few pairs) is drawn to the axis's edge.
    values = [1.0] + [v for _, r in pts for v in (r["chained"], *r["band"]) if 0 < v < math.inf]
    lo, hi = math.log(min(values)), math.log(max(values))
    if hi - lo < 0.02:
        lo, hi = lo - 0.01, hi + 0.01
    n = len(pts)

    def x(i: float) -> float:  # the base is at -1
        return PAD + (i + 1) / max(n, 1) * (W - 2 * PAD)

    def y(v: float) -> float:
        at = min(max(math.log(v), lo), hi) if v > 0 else lo
        return H - PAD - (at - lo) / (hi - lo) * (H - 2 * PAD)

    band_top = [(x(-1), y(1.0))] + [(x(i), y(r["band"][1])) for i, r in pts]
    band_bot = [(x(-1), y(1.0))] + [(x(i), y(r["band"][0])) for i, r in pts]
    poly = " ".join(f"{a:.1f},{b:.1f}" for a, b in band_top + band_bot[::-1])
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in [(x(-1), y(1.0))] + [(x(i), y(r["chained"])) for i, r in pts])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
        f'aria-label="chained time ratio to {esc(state.base.sha[:12])}">',
        f'<line x1="{PAD}" y1="{y(1.0):.1f}" x2="{W - PAD}" y2="{y(1.0):.1f}" stroke="#999" stroke-dasharray="4 3"/>',
        f'<polygon class="band" points="{poly}" fill="#9ecae1" fill-opacity="0.5" stroke="none"/>',
        f'<polyline class="trajectory" points="{line}" fill="none" stroke="#08519c" stroke-width="2"/>',
        f'<text x="{PAD}" y="{PAD - 20}" font-size="13">time per step relative to {esc(state.base.sha[:12])} '
        "(chained paired ratios, a step whose interval holds 1 counted as 1; band: the intervals in quadrature)</text>",
    ]
    for v in (min(values), 1.0, max(values)):
        parts.append(f'<text x="4" y="{y(v) + 4:.1f}" font-size="11">{v:.3f}</text>')
    for i, r in pts:
        cx, cy = x(i), y(r["chained"])
        if r.get("env_changed"):
            parts.append(
                f'<line class="env-change" x1="{cx:.1f}" y1="{PAD}" x2="{cx:.1f}" y2="{H - PAD}" stroke="#e6550d" '
                'stroke-dasharray="2 2"><title>environment changed</title></line>'
            )
        if r["outcome"] != "measured":
            parts.append(f'<text class="skipped" x="{cx - 4:.1f}" y="{cy + 4:.1f}" font-size="12" fill="#777">x</text>')
            continue
        colour, cls = "#08519c", "point"
        if r.get("confirmed"):
            colour, cls = "#cb181d", "point regression"
        elif r.get("improved"):
            colour, cls = "#238b45", "point improvement"
        mark = (
            f'<circle class="{cls}" cx="{cx:.1f}" cy="{cy:.1f}" r="{6 if colour != "#08519c" else 3}" fill="{colour}">'
            f"<title>{esc(r['sha'][:12])} {esc(r['subject'])}: {r['ratio']:.3f}</title></circle>"
        )
        parts.append(f'<a href="#c-{esc(r["sha"][:12])}">{mark}</a>' if colour != "#08519c" else mark)
    parts.append("</svg>")
    return "\n".join(parts)


def write_page(state: History) -> str:
    rows = state.trajectory()
    title = f"history of {state.workload} on {state.device}"
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}tr.regression{background:#fee}"
        "tr.improvement{background:#efe}tr.skipped{color:#777}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>parameters {esc(state.params)}; {len(state.commits)} commit(s) after "
        f"<code>{esc(state.base.sha[:12])}</code> ({esc(state.base.subject)}); each commit measured "
        "against the one before it, interleaved; confirmed: slower by its own sequential test, then "
        "again when paired anew in fresh processes, that recheck kept by Benjamini-Hochberg across the "
        f"history's rechecks at {state.fdr:g}; threshold {state.threshold:g}.</p>",
        _svg(state, rows),
    ]
    changes = state.env_changes()
    if changes:
        out.append("<h2>Environment changes</h2><ul>")
        out += [f"<li><code>{esc(s[:12])}</code>: {esc(what)}</li>" for s, what in changes]
        out.append("</ul>")
    drift = state.drifts()
    if drift:
        out.append("<h2>Slow drifts</h2><ul>")
        out += [
            f"<li><code>{esc(w.start[:12])}..{esc(w.end[:12])}</code>: {esc(w.screen_said())}; "
            f"rechecked: {esc(w.evidence.describe())}"
            + (f"; {esc(w.bisection)}" if w.bisection else "")
            + (f" (<code>{esc(w.culprit[:12])}</code>: {esc(state.subject_of(w.culprit))})" if w.culprit else "")
            + "".join(f"; {esc(name)} {delta:+.0f} us" for name, delta in operator_changes(w.why, 3))
            + "</li>"
            for w in drift
        ]
        out.append("</ul>")
    out.append(
        "<h2>Commits</h2><table><tr><th>commit</th><th>subject</th><th>against the one before</th>"
        "<th>time per step</th><th>chained</th><th>operators</th></tr>"
    )
    for r in rows:
        p = state.point(r["sha"])
        cls = "skipped" if r["outcome"] != "measured" else "regression" if r.get("confirmed") else ""
        if not cls and r.get("improved"):
            cls = "improvement"
        if r["outcome"] != "measured":
            verdict = f"skipped: {(r.get('error') or '').splitlines()[0] if r.get('error') else ''}"
        else:
            verdict = p.screen_said() if p and p.verdict else ""
            if p and p.recheck:
                verdict += f"; rechecked: {p.recheck.describe()}"
            if p and p.culprit:
                verdict += f"; bisected inside: first slower commit {p.culprit[:12]} ({state.subject_of(p.culprit)})"
            elif p and p.bisection:
                verdict += f"; {p.bisection}"
        secs = fmt_seconds(r["seconds"]) if r.get("seconds") else ""
        ops = operator_changes(p.why if p else None)
        why = (
            "<details><summary>why</summary><ul>"
            + "".join(f"<li>{esc(name)}: {delta:+.0f} us</li>" for name, delta in ops)
            + "</ul></details>"
            if ops
            else ""
        )
        out.append(
            f'<tr id="c-{esc(r["sha"][:12])}" class="{cls}"><td><code>{esc(r["sha"][:12])}</code></td>'
            f"<td>{esc(r['subject'])}</td><td>{esc(verdict)}</td><td>{esc(secs)}</td>"
            f"<td>{r['chained']:.3f}</td><td>{why}</td></tr>"
        )
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"
