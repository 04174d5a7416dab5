"""The roofline chart: one horizontal roof per pipe that ran, one slope per memory level, one
marker per kernel family (or NVTX range, or record) with its area proportional to its share
of time and its colour that of its pipe's roof, the step total as a star. Only the top few by
time are numbered; the key beside the axes names them. Points with no FLOPs or no DRAM bytes
cannot sit on a log-log chart: the footer counts them and their share of time.

Everything is computed before this is called, so a bad input never leaves a partial result."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from perfsuite.core.units import fmt_rate
from perfsuite.roofline.ceilings import Ceilings
from perfsuite.roofline.metrics import PIPE_LABEL
from perfsuite.roofline.points import Point
from perfsuite.storage.write import make_dir, save_figure

COLORS = {
    "fp64": "#8c564b",
    "fp32": "#1f77b4",
    "fp16": "#17becf",
    "tensor_fp64": "#bcbd22",
    "tensor_tf32": "#ff7f0e",
    "tensor_fp16": "#d62728",
    "tensor_fp8": "#9467bd",
    "tensor_int8": "#e377c2",
    "bf16": "#d62728",
    "*": "#000000",
}
LEVEL_STYLE = {"dram": ("DRAM", "-"), "l2": ("L2", "--"), "l1": ("L1", ":")}


def _label(p: Point) -> str:
    if p.id == "range":
        return p.nvtx_range
    return p.kernel if p.id == "group" else (p.short or p.id)


def draw(
    points: list[Point],
    ceilings: Ceilings,
    out: Path,
    title: str,
    total: Point | None = None,
    top: int = 8,
    total_time: float | None = None,
    notes: tuple[str, ...] = (),
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    total_time = total_time or sum(p.time_s for p in points) or 1.0
    shown = [p for p in points if p.intensity and p.flop_per_s]
    ranked = sorted(shown, key=lambda p: -p.time_s)[:top]
    # Roofs of the pipes whose drawn points hold >= 1 % of the time (and the step's own): a roof
    # for one 10-FLOP FP64 kernel would only cut through the picture.
    share: dict = {}
    for p in shown:
        share[p.pipe] = share.get(p.pipe, 0.0) + p.time_s / total_time
    ran = list(
        dict.fromkeys(
            ([total.pipe] if total and total.pipe else [])
            + [k for k, v in sorted(share.items(), key=lambda kv: -kv[1]) if k and v >= 0.01]
        )
    )
    roofs = (
        [("*", ceilings.compute["*"])]
        if "*" in ceilings.compute
        else [(k, ceilings.compute[k]) for k in ran if ceilings.compute.get(k)]
    )
    top_roof = max((r for _, r in roofs), default=None)
    # (the points shown, and the levels kept, have an intensity: the filters above)
    xs = cast(
        "list[float]",
        [p.intensity for p in shown]
        + [p.level_intensity(b) for p in ranked for b in (p.l2_bytes, p.l1_bytes) if p.level_intensity(b)],
    )
    xs += [r / bw for _, r in roofs for bw in ceilings.memory.values()]
    lo, hi = (min(xs) / 4, max(xs) * 4) if xs else (0.1, 100.0)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)

    # A Figure of its own, not pyplot's: nothing to close, and none left open when drawing raises
    # (a report of hostile records left 20 open, and every later figure warned: an error).
    fig = Figure(figsize=(12.5, 6.5))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.07, right=0.64, bottom=0.16)
    fastest = max(ceilings.memory.values(), default=None)
    for pipe, roof in roofs:  # from where the fastest memory slope meets it (or the whole width)
        start = roof / fastest if fastest else lo
        ax.hlines(
            roof,
            max(start, lo),
            hi,
            color=COLORS.get(pipe, "grey"),
            lw=2.5,
            zorder=2,
            label=f"{PIPE_LABEL.get(pipe, pipe)} roof {fmt_rate(roof, 'FLOP/s')} ({ceilings.source.get(pipe, '')})",
        )
    for level, (name, ls) in LEVEL_STYLE.items():
        bw = ceilings.memory.get(level)
        if bw:  # up to the highest roof, where it bends
            xl = x if top_roof is None else np.append(x[x < top_roof / bw], top_roof / bw)
            ax.plot(
                xl,
                bw * xl,
                color="k",
                ls=ls,
                lw=1.2,
                label=f"{name} {fmt_rate(bw, 'B/s')} ({ceilings.source.get(level, '')})",
            )
    # (below, the intensity and FLOP rate of a point in `shown` are not None: the filter above)
    for p in shown:
        ax.scatter(
            p.intensity,  # type: ignore[arg-type]  # shown points have both
            p.flop_per_s,  # type: ignore[arg-type]
            s=15 + 1500 * p.time_s / total_time,
            color=COLORS.get(p.pipe, "grey"),
            alpha=0.5,
            edgecolors="k",
            linewidths=0.5,
            zorder=3,
        )
    key = []
    for i, p in enumerate(ranked, 1):
        # Numbers around their markers in turn, so neighbours' numbers do not land on each other.
        ax.annotate(
            str(i),
            (p.intensity, p.flop_per_s),
            xytext=((4, 4), (4, -11), (-11, 4), (-11, -11))[(i - 1) % 4],
            textcoords="offset points",
            fontsize=8,
            weight="bold",
            zorder=5,
        )
        for nbytes, marker in ((p.l2_bytes, "s"), (p.l1_bytes, "^")):  # hierarchical: same work, other levels
            ai = p.level_intensity(nbytes)
            if ai:
                ax.plot(
                    [p.intensity, ai],  # type: ignore[arg-type]  # shown points have both
                    [p.flop_per_s] * 2,  # type: ignore[arg-type]
                    color=COLORS.get(p.pipe, "grey"),
                    lw=0.5,
                    alpha=0.6,
                )
                ax.scatter(
                    ai,
                    p.flop_per_s,  # type: ignore[arg-type]  # shown points have both
                    s=25,
                    marker=marker,
                    facecolors="none",
                    edgecolors=COLORS.get(p.pipe, "grey"),
                    zorder=4,
                )
        v = ceilings.judge(p)
        judged = (
            f", {v.pct:.0f}% of roof ({v.limiter})" if v.pct is not None else "" if p.exact else ", % of roof unknown"
        )
        key.append(
            f"{i:>2}  {_label(p)[:46]}\n     {100 * p.time_s / total_time:.1f}% of time, "
            f"{PIPE_LABEL.get(p.pipe, p.pipe)}{judged}{'' if p.exact else ', FLOPs: lower bound'}"
        )
    if total is not None and total.intensity and total.flop_per_s:
        ax.scatter(total.intensity, total.flop_per_s, marker="*", s=320, color="k", zorder=6)
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="", marker="o", color="grey", alpha=0.5, label="DRAM intensity (area ∝ time)"),
        Line2D([], [], ls="", marker="s", mfc="none", color="grey", label="L2 intensity (top ones)"),
        Line2D([], [], ls="", marker="^", mfc="none", color="grey", label="L1 intensity (top ones)"),
    ]
    if total is not None:
        handles.append(Line2D([], [], ls="", marker="*", ms=12, color="k", label="whole step"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.text(0.655, 0.50, "\n".join(key), fontsize=7, family="monospace", va="top")
    hidden = [p for p in points if p not in shown]
    foot = list(notes)
    if hidden:
        hidden_pct = 100 * sum(p.time_s for p in hidden) / total_time
        foot.append(f"not drawn (no FLOPs or no DRAM bytes): {len(hidden)} of {len(points)}, {hidden_pct:.1f}% of time")
    fig.text(0.07, 0.02, "\n".join(foot), fontsize=7.5, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte: DRAM bytes for the filled markers)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    out = Path(out)

    make_dir(out.parent, "chart folder")
    save_figure(fig, out, dpi=110)
    return out
