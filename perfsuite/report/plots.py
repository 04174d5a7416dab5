"""Matplotlib figures from records: one figure per workload."""

from __future__ import annotations

from pathlib import Path

from perfsuite.core.record import Record
from perfsuite.core.text import printable
from perfsuite.storage.write import save_figure


def throughput_figure(records: list[Record], path: Path) -> Path:
    """Horizontal bars of throughput per case, with the median CI turned into a throughput CI."""
    import matplotlib

    matplotlib.use("Agg")  # no display on benchmark hosts
    from matplotlib.figure import Figure

    labels, values, lo_err, hi_err = [], [], [], []
    # Label bars by the parameters that vary across the records; the constant ones go in the title.
    varying = [k for k in records[0].params if len({repr(r.params.get(k)) for r in records}) > 1]
    for r in records:
        s = r.stats
        tp = r.throughput
        # Printable: a control character in a name is a missing glyph to matplotlib (a warning).
        labels.append(printable(",".join(f"{k}={r.params.get(k)}" for k in varying) or r.workload))
        values.append(tp)
        # A longer step time means a lower throughput: the CI's ends swap.
        lo = r.work.items_per_step / s.ci_high if s.ci_high else tp
        hi = r.work.items_per_step / s.ci_low if s.ci_low else tp
        lo_err.append(max(0.0, tp - lo))
        hi_err.append(max(0.0, hi - tp))
    # A Figure of its own, not pyplot's: nothing to close, and none left open when drawing raises
    # (a report of hostile records left 20 open, and every later figure warned: an error).
    fig = Figure(figsize=(7, 0.45 * len(records) + 1.5))
    ax = fig.subplots()
    ax.barh(range(len(values)), values, xerr=[lo_err, hi_err], color="#4c72b0", capsize=3)
    ax.set_yticks(range(len(values)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"throughput ({records[0].throughput_unit}), median with 95% CI")
    ax.set_title(printable(f"{records[0].workload} on {records[0].device}"))

    save_figure(fig, path, dpi=110, bbox_inches="tight")
    return path
