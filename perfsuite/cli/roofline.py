"""`perfsuite roofline`: an Nsight Compute CSV (or this CPU's records) to a chart, a summary CSV
and a console summary. Everything is read and checked before anything is written."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli import values
from perfsuite.core.errors import PerfsuiteError, RecordError
from perfsuite.core.text import printable
from perfsuite.core.units import fmt_bytes, fmt_rate, fmt_seconds
from perfsuite.report.roofline_table import top_table
from perfsuite.roofline import ceilings as C
from perfsuite.roofline import chart
from perfsuite.roofline.ceilings import Ceilings
from perfsuite.roofline.cpu import record_points
from perfsuite.roofline.devices import KNOWN_DEVICES
from perfsuite.roofline.metrics import INST, PIPE_LABEL
from perfsuite.roofline.ncu import read_ncu_csv
from perfsuite.roofline.points import aggregate, by_kernel, by_range, point
from perfsuite.roofline.summary_csv import summary_csv
from perfsuite.storage.files import atomic_write_text, load_many, load_records
from perfsuite.storage.peaks import load_peaks

NAME = "roofline"


def add_arguments(sub) -> None:
    roof = sub.add_parser(NAME, help="roofline from an Nsight Compute CSV, or this CPU's from stored records")
    roof.add_argument("csv", type=Path, nargs="?", help="ncu --csv export (--page details or raw)")
    # Beyond an exaFLOP/s or a PB/s is no device's roof (1e308 TFLOP/s is no number in FLOP/s).
    roof.add_argument("--peak-compute", type=values.positive_float("--peak-compute", 1e6), help="TFLOP/s")
    roof.add_argument("--peak-bw", type=values.positive_float("--peak-bw", 1e6), help="GB/s")
    roof.add_argument("--device", help="take the peaks from a table of known GPUs")
    roof.add_argument("--label", default=None, help="chart title")
    roof.add_argument("--by-range", action="store_true", help="one marker per NVTX range instead of per launch")
    roof.add_argument("--out", type=Path, help="chart PNG (default reports/roofline/NAME.png)")
    roof.add_argument("--summary", type=Path, help="summary CSV (default beside the chart)")
    roof.add_argument("--records", type=Path, nargs="+", help="results files or folders: this CPU's roofline")
    roof.add_argument(
        "--record", type=Path, nargs="+", help="perfsuite results of the same step: executed vs model FLOPs and MFU"
    )


def command(args, console, recorder) -> int:
    if (args.csv is None) == (args.records is None):
        raise PerfsuiteError("give an ncu CSV file, or --records RESULTS for this CPU's roofline")
    return _cpu(args, console) if args.records else _ncu(args, console)


def _cpu(args, console) -> int:
    records, problems = load_many(args.records)
    for problem in problems:
        console.print(Text(printable(f"skipped: {problem}"), style="yellow"))
    points, peaks = record_points(records)
    if not points or "fp32" not in peaks:
        raise PerfsuiteError("no record with FLOPs, bytes and an fp32 machine peak (run `perfsuite peak` first)")
    # Each record against the roof of its own precision (bf16 has a higher one); one bandwidth.
    ceilings = Ceilings(
        {d: f for d, (f, _) in peaks.items() if f},
        {"dram": peaks["fp32"][1]},
        {**{d: "perfsuite peak" for d in peaks}, "dram": "perfsuite peak"},
    )
    out = args.out or Path("reports") / "roofline" / "cpu-roofline.png"
    chart.draw(points, ceilings, out, args.label or "this CPU: measured peaks, counted FLOPs, estimated bytes", top=12)
    summary = args.summary or out.with_suffix(".csv")
    atomic_write_text(summary, summary_csv(points, ceilings))
    console.print(Text(f"roofline: {out}  summary: {summary}"))
    return 0


def _ceilings(args, launches, console):
    sources = [C.given(args.peak_compute, args.peak_bw), C.from_file(launches)]
    if args.device:
        if args.device not in KNOWN_DEVICES:
            raise PerfsuiteError(f"--device {args.device}: unknown; known: {', '.join(KNOWN_DEVICES)}")
        sources.append(C.from_device(args.device))
    peak_file = getattr(args, "peak_file", None)
    if peak_file:
        try:
            measured, _ = C.from_peak_file(
                load_peaks(Path(peak_file)), next((l.device for l in launches if l.device), "")
            )
            sources.append(measured)
        except RecordError as exc:
            console.print(Text(f"peak file not used: {exc}", style="yellow"))
    roofs = C.merge(*sources)
    if not roofs.compute and not roofs.memory:
        raise PerfsuiteError(
            "no roofs: give --peak-compute TFLOP/s and --peak-bw GB/s, or --device NAME, profile "
            "with the peak metrics `perfsuite profile-step` prints, or run `perfsuite peak` on this GPU"
        )
    return roofs


def _instructions(launches, name: str) -> str:
    """A range's warp instructions executed (the step's work on the device: issue 56), where the
    export carries them for each of its launches; empty where it does not (exports made before
    profile-step asked for them)."""
    counts = [l.metrics.get(INST) for l in launches if name in l.ranges]
    if not counts or any(c is None for c in counts):
        return ""
    return f"{sum(counts):.4g} warp instructions, "


def _model_record(args):
    given = getattr(args, "record", None)
    if not given:
        return None
    paths = given if isinstance(given, (list, tuple)) else [given]
    records = [r for p in paths for r in load_records(p) if r.work.flops_per_step]
    if not records:
        raise PerfsuiteError(f"--record {', '.join(map(str, paths))}: no record with model FLOPs per step")
    if len({r.work.flops_per_step for r in records}) > 1:
        raise PerfsuiteError(
            f"--record: {len(records)} records with different FLOPs per step "
            f"({', '.join(r.label() for r in records)}); give the results of one case"
        )
    return records[0]


def _ncu(args, console) -> int:
    record = _model_record(args)
    launches = read_ncu_csv(args.csv)
    points = [point(l, args.csv) for l in launches]
    roofs = _ceilings(args, launches, console)
    total = aggregate(points, "total")
    groups = by_kernel(points)
    ranges = by_range(points, launches)
    model_flops = record.work.flops_per_step if record else None
    csv_text = summary_csv(points + [total] + ranges + groups, roofs, total.time_s, model_flops)
    name = args.csv.name.removesuffix(".gz").removesuffix(".csv")
    out = args.out or Path("reports") / "roofline" / f"{name}.png"
    summary = args.summary or out.with_suffix(".csv")

    device = next((l.device for l in launches if l.device), "")
    console.print(
        Text(
            f"{args.csv}: {len(points)} launches{f' on {device}' if device else ''}, "
            f"{len(groups)} kernel families, {len(ranges)} NVTX ranges"
            + (f" ({', '.join(r.nvtx_range for r in ranges)})" if ranges else "")
        )
    )
    split = ", ".join(
        f"{PIPE_LABEL.get(k, k)} {v:.4g}" for k, v in sorted(total.pipes().items(), key=lambda kv: -kv[1]) if v > 0
    )
    console.print(
        Text(
            f"executed FLOPs {total.flops:.4g} ({split}) in {fmt_seconds(total.time_s)} of kernels: "
            f"{fmt_rate(total.flop_per_s or 0.0, 'FLOP/s')}"
        )
    )
    if not total.exact:
        console.print(
            Text(
                f"FLOPs are a {total.note}: add the sm__ops_path_tensor_src_* metrics that "
                "`perfsuite profile-step` lists to the ncu command",
                style="yellow",
            )
        )
    ran = {k for k, v in total.pipes().items() if v > 0} | {"*"}  # the roofs of pipes that did no work are noise
    console.print(
        Text(
            "roofs: "
            + "; ".join(
                [
                    f"{PIPE_LABEL.get(k, k)} {fmt_rate(v, 'FLOP/s')} ({roofs.source.get(k, '')})"
                    for k, v in roofs.compute.items()
                    if k in ran
                ]
                + [f"{k.upper()} {fmt_rate(v, 'B/s')} ({roofs.source.get(k, '')})" for k, v in roofs.memory.items()]
            )
        )
    )
    for pipe, note in roofs.notes.items():
        if pipe in ran:
            console.print(Text(note, style="yellow"))
    missing = roofs.missing(points)
    if missing:
        console.print(
            Text(
                f"no roof for {', '.join(PIPE_LABEL.get(m, m) for m in missing)}: kernels that used it "
                "are not judged (give --device, or profile with the peak metrics)",
                style="yellow",
            )
        )
    console.print(top_table(groups, roofs, total.time_s))
    for r in ranges:
        v = roofs.judge(r)
        console.print(
            Text(
                f"  range {r.nvtx_range}: {r.launches} launches, {fmt_seconds(r.time_s)}, "
                f"{'≥' if not r.exact else ''}{r.flops:.4g} FLOPs, {fmt_bytes(r.dram_bytes)} DRAM, "
                + _instructions(launches, r.nvtx_range)
                + f"{fmt_rate(r.flop_per_s or 0.0, 'FLOP/s')}"
                + (
                    f", {v.pct:.1f}% of roof ({v.limiter})"
                    if v.pct is not None
                    else ""
                    if r.exact
                    else ", % of roof unknown (tensor FLOPs unknown)"
                )
            )
        )
    if record:
        _print_model(console, record, total, roofs)

    notes = (total.note,) if total.note else ()
    title = (
        args.label
        or f"{name}{f' on {device}' if device else ''}: {len(points)} launches, "
        f"{'NVTX ranges' if args.by_range else 'kernel families'}"
    )
    chart.draw(
        ranges if args.by_range and ranges else groups,
        roofs,
        out,
        title,
        total=total,
        total_time=total.time_s,
        notes=notes,
    )
    atomic_write_text(summary, csv_text)
    console.print(Text(f"-> {out}, {summary}"))
    return 0


def _print_model(console, record, total, roofs) -> None:
    """Executed (hardware) FLOPs against the model's, and the model FLOP/s of the real step."""
    mf = record.work.flops_per_step
    console.print(
        Text(
            f"executed {total.flops:.4g} FLOPs (ncu) vs model {mf:.4g} ({record.work.flops_method}, "
            f"{record.label()}): executed/model = {total.flops / mf:.3f}"
        )
    )
    t = total.time_s
    line = (
        f"over the kernels' {fmt_seconds(t)}: hardware {fmt_rate(total.flops / t, 'FLOP/s')}, "
        f"model {fmt_rate(mf / t, 'FLOP/s')}"
    )
    roof = roofs.pipe_roof(total.pipe) if total.pipe else None
    step = record.stats.median
    line += f"; the recorded step ({fmt_seconds(step)} median): model {fmt_rate(mf / step, 'FLOP/s')}"
    if roof:
        line += f" = MFU {100 * mf / step / roof:.2f}% of the {PIPE_LABEL.get(total.pipe, total.pipe)} roof"
    console.print(Text(line))
