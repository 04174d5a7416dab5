"""The roofline chart and the summary CSV. Everything is computed before anything is written,
so a bad input never leaves a partial result behind."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from perfsuite.roofline.model import Point

SUMMARY_COLUMNS = ("id", "kernel", "nvtx_range", "flops", "dram_bytes", "l2_bytes", "l1_bytes", "time_s",
                   "arithmetic_intensity", "flop_per_s", "bound")


def summary_csv(rows: list[Point], ridge) -> str:
    """`ridge`: one ridge point (FLOP/B) for all rows, or a function of the row."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(SUMMARY_COLUMNS)
    for p in rows:
        w.writerow([p.id, p.kernel, p.nvtx_range, f"{p.flops:.6g}", f"{p.dram_bytes:.6g}",
                    "" if p.l2_bytes is None else f"{p.l2_bytes:.6g}", "" if p.l1_bytes is None else f"{p.l1_bytes:.6g}",
                    f"{p.time_s:.6g}", "" if p.intensity is None else f"{p.intensity:.6g}",
                    "" if p.flop_per_s is None else f"{p.flop_per_s:.6g}",
                    p.bound(ridge(p) if callable(ridge) else ridge)])
    return buf.getvalue()


def draw(points: list[Point], peak_flops: float, peak_bw: float, out: Path, title: str,
         hierarchical: bool = True, extra_ceilings: tuple = ()) -> Path:
    """Log-log roofline: compute and bandwidth ceilings, the ridge, one marker per point sized
    by its share of time and labelled; L2/L1 intensities as hollow markers when present."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ridge = peak_flops / peak_bw
    shown = [p for p in points if p.intensity is not None and p.flop_per_s]
    ais = [p.intensity for p in shown] or [ridge]
    lo, hi = min(min(ais), ridge) / 10, max(max(ais), ridge) * 10
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.plot(x, np.minimum(peak_flops, peak_bw * x), color="k", lw=2, label="roofline")
    for label, flops in extra_ceilings:  # e.g. the bf16 matmul peak above the fp32 one
        ax.plot(x, np.minimum(flops, peak_bw * x), color="k", lw=1, ls="--", label=label)
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:.3g} FLOP/B", (ridge, peak_flops), textcoords="offset points", xytext=(5, -14),
                fontsize=8, color="grey")
    total_t = sum(p.time_s for p in shown) or 1.0
    for p in shown:
        size = 30 + 600 * p.time_s / total_t
        ax.scatter(p.intensity, p.flop_per_s, s=size, alpha=0.7)
        label = (p.nvtx_range if p.id == "range" else p.kernel)[:28] or p.id
        ax.annotate(label, (p.intensity, p.flop_per_s), textcoords="offset points", xytext=(4, 4), fontsize=7)
        if hierarchical:
            for bytes_, marker in ((p.l2_bytes, "s"), (p.l1_bytes, "^")):
                if bytes_:
                    ax.scatter(p.flops / bytes_, p.flop_per_s, s=20, marker=marker, facecolors="none",
                               edgecolors="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
