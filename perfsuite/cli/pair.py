"""`perfsuite pair`: two values of one parameter, interleaved."""

from __future__ import annotations

import os

from rich.text import Text

from perfsuite.core.errors import PerfsuiteError


def pair_command(args, console) -> int:
    """`perfsuite pair`: each case's time ratio A/B with its CI, written case by case with --out."""
    from perfsuite.compare.pair import pair
    from perfsuite.core import registry
    from perfsuite.core.config import resolve_device
    from perfsuite.core.params import expand_sweep, parse_assignments
    from perfsuite.measure.timing import clock_for
    from perfsuite.storage.files import atomic_write_text, document

    w = registry.get(args.workload)
    varied = parse_assignments([args.vary], w.params, w.name)
    (key, values), = varied.items()
    if len(values) != 2:
        raise PerfsuiteError(f"--vary expects exactly two values of {key!r}, got {len(values)}")
    sweep = parse_assignments(args.param, w.params, w.name)
    if key in sweep:
        raise PerfsuiteError(f"parameter {key!r} is given both by --vary and -p")
    if args.out is not None and os.path.lexists(args.out):  # a dangling symlink too
        raise PerfsuiteError(f"--out {args.out}: file exists; refusing to overwrite")
    if args.out is not None:  # checked before measuring, so no finished pair is thrown away
        from perfsuite.storage.files import writable_dir

        writable_dir(args.out.parent, "--out folder")
    device = resolve_device(args.device)
    cases = expand_sweep(sweep)
    for case in cases:
        for v in values:
            w.check({**case, key: v}, device)
    results = []
    for case in cases:
        r = pair(w, case, key, values[0], values[1], device, clock_for(device, "host"), args.budget)
        results.append(r)
        ci = r.time_ratio_ci
        ci_txt = "" if ci is None else f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})"
        saved = "" if r.saved_ratio is None else f"; saved for backward {r.a}/{r.b} = {r.saved_ratio:.2f}"
        console.print(Text(f"{w.name} {case}: time {r.a}/{r.b} = {r.time_ratio:.3f}{ci_txt} over "
                           f"{len(r.ratios)} pairs{saved}"))
        if args.out is not None:
            atomic_write_text(args.out, document("pair", [x.to_dict() for x in results]))
    return 0
