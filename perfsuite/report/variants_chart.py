"""A variant study as a figure: speed-up against the accuracy kept (each with what it rests on: the
gate's interval, the lowest fraction of eager kept), the Pareto front of the variants that no other
beats on both, the floor; and beside it, each variant's model size and one step's peak memory."""

from __future__ import annotations

from pathlib import Path


def pareto(points: list[tuple[str, float, float]]) -> list[str]:
    """The names of the points (name, speed-up, kept) that no other point beats on both axes."""
    front = []
    for name, s, k in points:
        if not any((s2 >= s and k2 >= k) and (s2 > s or k2 > k) for _, s2, k2 in points):
            front.append(name)
    return front


def chart(study, folder: Path) -> Path:
    """The figure of one study (perfsuite.compare.variant_study.VariantStudy), a PNG in `folder`
    named after its workload and case, written through perfsuite's one writer."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [*([study.eager] if study.eager is not None else []), *[r for r in study.rows if r.status == "measured"]]
    points = []
    for r in rows:
        speed = r.speedup if r.verdict is not None else 1.0
        kept = min(r.kept.values()) if r.kept else None
        if speed is not None and kept is not None:
            points.append((r.variant, speed, kept))
    fig, (ax, mem) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    _speed_panel(ax, study, rows, points)
    _memory_panel(mem, rows)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    from perfsuite.storage import write

    name = f"variants-{study.workload}-" + "-".join(f"{k}={v}" for k, v in study.params.items() if v not in ("", None))
    return write.write_bytes(write.file_in(folder, name[:150], ".png"), png.getvalue())


def _speed_panel(ax, study, rows: list, points: list[tuple[str, float, float]]) -> None:
    """Speed-up (with the gate's interval) against the accuracy kept, the Pareto front, the floor."""
    front = set(pareto(points))
    for r in rows:
        match = next((p for p in points if p[0] == r.variant), None)
        if match is None:
            continue
        _, speed, kept = match
        lo, hi = r.speedup_interval or (speed, speed)
        color = "tab:green" if r.variant in front else ("tab:red" if r.holds is False else "tab:blue")
        ax.errorbar(speed, kept, xerr=[[speed - lo], [hi - speed]], fmt="o", color=color, capsize=3)
        ax.annotate(r.variant, (speed, kept), textcoords="offset points", xytext=(5, 5), fontsize=8)
    on_front = sorted((p for p in points if p[0] in front), key=lambda p: p[1])
    if len(on_front) > 1:
        ax.plot([p[1] for p in on_front], [p[2] for p in on_front], "--", color="tab:green", label="Pareto front")
    ax.axhline(study.floor, color="grey", linestyle=":", label=f"floor {study.floor:.0%} of eager")
    ax.axvline(1.0, color="grey", linewidth=0.5)
    ax.set_xlabel("speed-up against eager (the gate's interval)")
    ax.set_ylabel("accuracy kept: lowest fraction of eager's")
    case = ", ".join(f"{k}={v}" for k, v in study.params.items() if k in ("batch_size", "shape", "model"))
    ax.set_title(f"{study.workload} [{case}] on {study.device}")
    ax.legend(loc="lower left", fontsize=8)


def _memory_panel(mem, rows: list) -> None:
    """Each variant's model size and one step's peak above its start."""
    names = [r.variant for r in rows]
    sizes = [(r.size_bytes or 0) / 1e6 for r in rows]
    # What one step allocates above its start: the allocator's on CUDA, the host's RSS on the CPU.
    peaks = [r.memory.get("cuda_peak_delta_bytes", r.memory.get("host_peak_delta_bytes", 0.0)) / 1e6 for r in rows]
    xs = range(len(rows))
    mem.bar([x - 0.2 for x in xs], sizes, width=0.4, label="model size (MB)")
    mem.bar([x + 0.2 for x in xs], peaks, width=0.4, label="one step's peak above its start (MB)")
    mem.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
    mem.legend(fontsize=8)
    mem.set_title("memory")
