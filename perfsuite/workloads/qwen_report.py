"""The inference study's report: six panels against batch size, a normalised heatmap, the
optimal batch size (highest throughput within a latency bound), the main bottleneck, and
JSON + CSV exports of the table."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from perfsuite.core.record import Record
from perfsuite.measuring.percall import timed_tail
from perfsuite.stats import summary as stats
from perfsuite.storage.write import save_figure

COLUMNS = (
    "batch_size",
    "dtype",
    "shape",
    "latency_batch_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_sample_ms",
    "samples_per_s",
    "batches_per_s",
    "tokens_per_s",
    "peak_mem_mb",
    "batch_mem_mb",
    "flops_per_s",
    "peak_fraction",
    "peak_roof",
    "padding_fraction",
    "tokenize_ms",
    "gpu_util_pct",
    "bound",
    "params_trainable",
    "params_frozen",
    "protocol",
    "latency_source",
)


def latencies(r: Record) -> tuple[list[float], str, str]:
    """(seconds per batch, protocol, where they come from). The fixed protocol's own runs when
    the case asked for it; else the per-batch times of the timed region; else the runner's
    samples, which are per batch only when its blocks held one call."""
    proto = r.extra.get("protocol") or {"name": "adaptive"}
    if proto.get("name") == "fixed" and proto.get("latencies_s"):
        return list(proto["latencies_s"]), f"fixed {proto['warmup_runs']}+{proto['runs']}", "per-batch"
    per_call = timed_tail(r.extra.get("batch_latencies_s") or [], len(r.samples_s), r.block_size)
    if per_call:
        return per_call, "adaptive", "per-batch"
    return list(r.samples_s), "adaptive", "per-batch" if r.block_size == 1 else f"means of {r.block_size}"


def row(r: Record) -> dict:
    p, e = r.params, r.extra
    lat, protocol, source = latencies(r)
    med = stats.median(lat)
    # On CPU the process's peak RSS in the timed region (weights + activations): the growth alone
    # reads 0 whenever the allocator reuses memory freed by an earlier case.
    cuda = r.memory.get("cuda_max_allocated_bytes")
    mem = cuda or r.memory.get("host_peak_rss_bytes") or 0
    resident = e.get("model_resident_bytes")
    bound = r.bound
    return {
        "batch_size": p.get("batch_size"),
        "dtype": p.get("dtype"),
        "shape": p.get("shape"),
        "latency_batch_ms": med * 1e3,
        "latency_p90_ms": stats.percentile(lat, 90) * 1e3,
        "latency_p99_ms": stats.percentile(lat, 99) * 1e3,
        "latency_sample_ms": med * 1e3 / r.work.items_per_step,
        "samples_per_s": r.work.items_per_step / med,
        "batches_per_s": 1.0 / med,
        "tokens_per_s": (e.get("tokens_real") or 0) / med,
        "peak_mem_mb": mem / 1e6,
        # The study's "memory used by a batch": CUDA peak allocated minus what the model holds.
        "batch_mem_mb": None if cuda is None or resident is None else (cuda - resident) / 1e6,
        "flops_per_s": None if r.work.flops_per_step is None else r.work.flops_per_step / med,
        # At the latency used here (the record's own is over its block samples).
        "peak_fraction": None if r.peak_fraction is None else r.peak_fraction * r.stats.median / med,
        "peak_roof": (r.peak or {}).get("roof"),
        "padding_fraction": e.get("padding_fraction"),
        "tokenize_ms": None if e.get("tokenize_s") is None else e["tokenize_s"] * 1e3,
        "gpu_util_pct": bound.gpu_util_pct,
        "bound": bound.verdict,
        "params_trainable": e.get("parameters_trainable"),
        "params_frozen": e.get("parameters_frozen"),
        "protocol": protocol,
        "latency_source": source,
    }


def optimal(rows: list[dict], latency_bound_ms: float | None) -> dict | None:
    ok = [r for r in rows if latency_bound_ms is None or r["latency_p90_ms"] <= latency_bound_ms]
    return max(ok, key=lambda r: r["samples_per_s"]) if ok else None


def bottleneck(rows: list[dict], best: dict) -> str:
    """The main limiter at the chosen batch size, then any other finding, from the measured figures."""
    same = sorted((r for r in rows if r["dtype"] == best["dtype"]), key=lambda r: r["batch_size"])
    found = []
    # An idle GPU outranks every other finding: no kernel-side change helps until the host keeps up.
    if best.get("bound") == "host-bound":
        found.append(
            f"host: the GPU was busy only {best['gpu_util_pct']:.0f}% of the step at batch "
            f"{best['batch_size']} (NVML); the CPU cannot launch kernels fast enough (a larger batch, "
            "CUDA graphs or torch.compile mean fewer launches per sample)"
        )
    if best.get("peak_fraction") and best["peak_fraction"] >= 0.5:
        roof = best.get("peak_roof") or best["dtype"]
        found.append(
            f"compute: {best['peak_fraction']:.0%} of the measured {roof} matmul peak at batch {best['batch_size']}"
        )
    if best.get("padding_fraction") and best["padding_fraction"] >= 0.3:
        found.append(
            f"padding: {best['padding_fraction']:.0%} of the tokens computed at batch {best['batch_size']} "
            "are padding (pad to the longest in the batch); sort by length or bucket"
        )
    i = same.index(best)
    if i + 1 < len(same) and same[i + 1]["samples_per_s"] < best["samples_per_s"] * 1.05:
        found.append(f"throughput saturates past batch {best['batch_size']}")
    elif i + 1 == len(same):
        found.append(f"throughput still grows up to the largest batch tried ({best['batch_size']}); try larger")
    return "; also ".join(found) if found else "none stands out"


def six_panels(rows: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    panels = [
        ("latency_sample_ms", "latency / sample (ms)"),
        ("latency_batch_ms", "latency / batch (ms)"),
        ("samples_per_s", "throughput (samples/s)"),
        ("peak_mem_mb", "peak memory (MB)"),
        ("flops_per_s", "achieved FLOP/s"),
        ("tokens_per_s", "tokens/s"),
    ]
    # A Figure of its own, not pyplot's: nothing to close, and none left open when drawing raises
    # (a report of hostile records left 20 open, and every later figure warned: an error).
    fig = Figure(figsize=(13, 7))
    axes = fig.subplots(2, 3)
    by_dtype = defaultdict(list)
    for r in rows:
        by_dtype[r["dtype"]].append(r)
    for ax, (key, title) in zip(axes.flat, panels):
        for dtype, rs in sorted(by_dtype.items()):
            rs = sorted(rs, key=lambda r: r["batch_size"])
            ax.plot([r["batch_size"] for r in rs], [r[key] or 0 for r in rs], marker="o", label=dtype)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.suptitle("Qwen2 classifier: batch-size sweep (memory: CUDA peak allocated, or process peak RSS on CPU)")
    fig.subplots_adjust(hspace=0.45, wspace=0.3)

    save_figure(fig, path, dpi=100, bbox_inches="tight")
    return path


def heatmap(rows: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.figure import Figure

    keys = ["latency_sample_ms", "latency_batch_ms", "samples_per_s", "tokens_per_s", "peak_mem_mb", "flops_per_s"]
    m = np.array([[float(r[k] or 0) for k in keys] for r in rows])
    lo, hi = m.min(axis=0), m.max(axis=0)
    norm = (m - lo) / np.where(hi > lo, hi - lo, 1)
    # A Figure of its own, not pyplot's: nothing to close, and none left open when drawing raises
    # (a report of hostile records left 20 open, and every later figure warned: an error).
    fig = Figure(figsize=(8, 0.45 * len(rows) + 1.5))
    ax = fig.subplots()
    ax.imshow(norm, cmap="viridis", aspect="auto", vmin=0, vmax=1)
    ax.set_xticks(range(len(keys)), keys, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [f"bs={r['batch_size']} {r['dtype']}" for r in rows])
    for i in range(len(rows)):
        for j in range(len(keys)):
            ax.text(
                j, i, f"{m[i, j]:.3g}", ha="center", va="center", color="w" if norm[i, j] < 0.5 else "k", fontsize=7
            )
    ax.set_title("metrics, each column scaled to its own min..max")

    save_figure(fig, path, dpi=100, bbox_inches="tight")
    return path


def section(records: list[Record], out_dir: Path, latency_bound_ms: float | None = None) -> list[str]:
    import pandas as pd

    out_dir = Path(out_dir)
    batch = [r for r in records if r.params.get("scenario", "batch") == "batch"]
    lines = ["### Inference study", ""]
    if batch:
        table = pd.DataFrame([row(r) for r in batch], columns=list(COLUMNS)).sort_values(
            ["dtype", "batch_size"], kind="stable"
        )
        from perfsuite.storage.files import versioned
        from perfsuite.storage.write import save_csv, write_text

        rows = [
            {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
            for r in table.to_dict(orient="records")
        ]
        write_text(out_dir / "qwen-sweep.json", versioned("qwen-sweep", {"results": rows}))
        save_csv(table, out_dir / "qwen-sweep.csv")
        six = six_panels(rows, out_dir / "qwen-batch-sweep.png")
        heat = heatmap(rows, out_dir / "qwen-heatmap.png")
        best = optimal(rows, latency_bound_ms)
        bound = "no latency bound" if latency_bound_ms is None else f"p90 latency <= {latency_bound_ms:g} ms"
        lines += [
            f"![batch-size sweep]({six.name})",
            "",
            f"![normalised metrics]({heat.name})",
            "",
            "Exports: `qwen-sweep.json`, `qwen-sweep.csv`.",
            "",
        ]
        if best is None:
            lines += [f"- no batch size meets {bound}", ""]
        else:
            frac = "" if best["peak_fraction"] is None else f", {best['peak_fraction']:.0%} of peak"
            if best["gpu_util_pct"] is not None:
                frac += f", {best['bound']} (GPU busy {best['gpu_util_pct']:.0f}%, NVML)"
            if best["batch_mem_mb"] is not None:
                frac += f", {best['batch_mem_mb']:.0f} MB GPU memory above the model's"
            lines += [
                f"- **optimal batch size: {best['batch_size']} ({best['dtype']})** ({bound}): "
                f"{best['samples_per_s']:.1f} samples/s, {best['batches_per_s']:.2f} batches/s, "
                f"p90 {best['latency_p90_ms']:.1f} ms{frac}",
                f"- main bottleneck: {bottleneck(rows, best)}",
                "",
            ]
    protocols = sorted({latencies(r)[1] for r in records})
    lines += [
        "Protocol: "
        + "; ".join(
            "adaptive (warm-up until the step time settles, then timed until the median's 95% CI is within "
            "the target or the budget is spent)"
            if p == "adaptive"
            else f"{p} (the week-1 study's: {p.split()[1].replace('+', ' warm-up + ')} measured batches, each "
            "synchronised and timed on its own)"
            for p in protocols
        )
        + ". Latency percentiles are over "
        "per-batch times"
        + (
            "."
            if all(latencies(r)[2] == "per-batch" for r in records)
            else " where kept; elsewhere over block means (they understate the tails)."
        ),
        "",
    ]
    for r in records:
        sc = r.params.get("scenario")
        if sc == "singlestream":
            from perfsuite.stats import summary as stats

            lat = latencies(r)[0]
            lines.append(
                f"- SingleStream ({r.params.get('dtype')}): p90 latency {stats.percentile(lat, 90) * 1e3:.1f} ms "
                f"per query, median {stats.median(lat) * 1e3:.1f} ms"
            )
        elif sc == "offline":
            lines.append(
                f"- Offline ({r.params.get('dtype')}, batch {r.params.get('batch_size')}): "
                f"{r.throughput:.1f} samples/s over {int(r.work.items_per_step)} samples"
            )
    e = records[0].extra
    if "load_s" in e:
        split = (
            ""
            if "parameters_trainable" not in e
            else (f" ({e['parameters_trainable'] / 1e6:.1f} M trainable, {e['parameters_frozen'] / 1e6:.1f} M not)")
        )
        resident = (
            "" if "model_resident_bytes" not in e else f", {e['model_resident_bytes'] / 1e6:.0f} MB resident on the GPU"
        )
        lines += [
            "",
            f"Model: {e['parameters'] / 1e6:.1f} M parameters{split}, {e['size_mb']:.0f} MB{resident}, "
            f"built/loaded in {e['load_s']:.1f} s.",
        ]
    acc = [r for r in records if "accuracy" in r.extra]
    for r in acc:
        lines.append(
            f"- accuracy {r.extra['accuracy']:.3f}, macro F1 {r.extra['macro_f1']:.3f}, "
            f"weighted F1 {r.extra['weighted_f1']:.3f}"
        )
    return lines + [""]
