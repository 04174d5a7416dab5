"""`perfsuite amp`: one workload in two precisions, interleaved."""

from __future__ import annotations

import os

from rich.text import Text

from perfsuite.core.errors import PerfsuiteError


def cmd_amp(args, console) -> int:
    from perfsuite.compare.amp import compare_precisions
    from perfsuite.core import registry
    from perfsuite.core.config import resolve_device
    from perfsuite.core.params import single_values
    from perfsuite.core.units import fmt_bytes, fmt_seconds
    from perfsuite.measure.timing import clock_for
    from perfsuite.stats.summary import median
    from perfsuite.storage.files import atomic_write_text, document

    workload = registry.get(args.workload)
    given = single_values(args.param, workload)  # one case: a value list is an error, not silently cut
    if "precision" in given:
        raise PerfsuiteError("set the two precisions with --precisions A,B, not -p precision=")
    precisions = args.precisions.split(",")
    if len(precisions) != 2 or any(p not in ("fp32", "bf16", "fp16") for p in precisions):
        raise PerfsuiteError(f"--precisions expects two of fp32, bf16, fp16, got {args.precisions!r}")
    if precisions[0] == precisions[1]:
        raise PerfsuiteError(f"--precisions {args.precisions}: compares {precisions[0]} with itself; name two")
    if args.pairs < 2 or args.steps < 5:
        raise PerfsuiteError("--pairs must be >= 2 and --steps >= 5")
    if args.out is not None:  # checked before measuring: a minute's comparison is not thrown away
        from perfsuite.storage.files import writable_dir

        if os.path.lexists(args.out):  # a dangling symlink too
            raise PerfsuiteError(f"--out {args.out}: file exists; refusing to overwrite")
        writable_dir(args.out.parent, "--out folder")
    device = resolve_device(args.device)
    for p in precisions:
        workload.check({**given, "precision": p}, device)
    console.print(f"{workload.name} {given or ''} on {device}: {precisions[0]} vs {precisions[1]}, "
                  f"{args.pairs} interleaved pairs, {args.steps}-step loss check", highlight=False)
    res = compare_precisions(workload.name, given, device, clock_for(device), precisions[0], precisions[1],
                             pairs=args.pairs, steps=args.steps, loss_tolerance=args.loss_tol)
    console.print(Text(f"  step time: {fmt_seconds(median(res.time_a_s))} ({res.precision_a}) vs "
                       f"{fmt_seconds(median(res.time_b_s))} ({res.precision_b})"))
    console.print(Text(f"  saved for backward: {fmt_bytes(res.saved_bytes_a)} vs {fmt_bytes(res.saved_bytes_b)} "
                       f"(ratio {res.memory_ratio:.2f})"))
    console.print(Text("  " + res.verdict(), style="green" if res.accuracy_ok else "bold red"))
    if line := res.bound_line():
        console.print(Text("  where the time went: " + line))
    if args.out is not None:
        atomic_write_text(args.out, document("amp", [res.to_dict()]))
    return 0 if res.accuracy_ok else 3  # a case that failed its check, not a slowdown
