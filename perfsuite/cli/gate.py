"""`perfsuite gate`: the interleaved regression gate against a base revision."""

from __future__ import annotations

import os

from rich.text import Text

from perfsuite.core.errors import PerfsuiteError
from perfsuite.measure import heap


def gate_command(args, console) -> int:
    """`perfsuite gate`: the self-check (--slowdown), learning noise floors, or the gate itself."""
    from perfsuite.core import registry
    from perfsuite.core.config import resolve_device
    from perfsuite.measure.system import pinned

    if args.threshold < 0:
        raise PerfsuiteError(f"--threshold must be >= 0, got {args.threshold}")
    if args.builds < 1:
        raise PerfsuiteError(f"--builds must be >= 1, got {args.builds}")
    if args.json is not None and args.json.exists():
        raise PerfsuiteError(f"--json {args.json}: file exists; refusing to overwrite")
    new = registry.get(args.workload)
    device = resolve_device(args.device)
    threads = args.threads  # None: torch's own (see the module's docstring for when 1 helps)
    # The self-check times both arms in this process, so this process holds the heap; otherwise
    # the sides hold their own (perfsuite.compare.side_worker) and this one only drives them.
    held = heap.apply(args.heap if args.slowdown is not None else "default")
    if args.slowdown is not None and args.heap == "steady" and held["heap"] != "steady":
        console.print(Text(f"--heap steady: not held ({held['reason']}); page faults stay in the pairs",
                           style="yellow"))
    with pinned(None, threads):
        return gate_revisions(args, console, new, device, threads)


def gate_revisions(args, console, new, device: str, threads: int | None) -> int:
    from perfsuite.compare import gate as g
    from perfsuite.core.errors import Unsupported
    from perfsuite.measure.timing import clock_for
    from perfsuite.core.params import expand_sweep, parse_assignments
    from perfsuite.storage.files import atomic_write_text, document, load_document

    from perfsuite.storage.write import make_dir

    clock = clock_for(device, "host")  # host-inclusive: both versions pay the same sync
    # Outputs checked before anything is measured: a verdict is never thrown away at the end.
    if args.json is not None:
        if os.path.lexists(args.json):
            raise PerfsuiteError(f"--json {args.json}: file exists; refusing to overwrite")
        make_dir(args.json.parent, "--json folder")
    in_process = args.slowdown is not None  # the self-check times both arms here; a gate drives side processes
    how = (f"{args.budget:g}s per case, {args.builds} " + ("build(s)" if in_process else "process(es)") + " per side, "
           + (f"{threads} torch thread(s)" if threads else "torch's own threads")
           + (f", heap {heap.state()['heap']}" if in_process else f", heap {args.heap} in each side process"))
    cases = expand_sweep(parse_assignments(args.param, new.params, new.name))
    runnable = []
    for case in cases:
        try:
            new.check(case, device)
            runnable.append(case)
        except Unsupported as exc:
            console.print(Text(f"skipped {new.name} {case}: {exc}", style="yellow"))
    label = lambda case: f"{new.name}[{','.join(f'{k}={v}' for k, v in new.resolve(case).items())}]"  # noqa: E731

    if args.slowdown is not None:
        if not 0 < args.slowdown < 1 or args.trials < 1:
            raise PerfsuiteError("--slowdown must be in (0, 1) and --trials >= 1")
        out = []
        for case in runnable:
            res = g.power_and_false_alarms(lambda: new.build(case, device).fn, clock, args.slowdown,
                                           args.trials, args.budget, args.threshold, args.builds)
            res["threads"] = threads
            res["heap"] = heap.state()
            lo, hi = g.wilson_interval(res["caught"], res["trials"])
            flo, fhi = g.wilson_interval(res["false_alarms"], res["trials"])
            console.print(Text(
                f"{label(case)}: injected {res['fraction_estimated']:.1%} ({res['matmuls_added']} matmuls): "
                f"caught {res['caught']}/{res['trials']} (95% CI {lo:.0%}-{hi:.0%}); unchanged flagged "
                f"{res['false_alarms']}/{res['trials']} (95% CI {flo:.0%}-{fhi:.0%}); {how}"))
            out.append({"case": label(case), **res})
        if args.json:
            atomic_write_text(args.json, document("gate-selfcheck", out))
        return 0

    floors = load_document(args.floors, "noise-floors") if args.floors.exists() else {}
    if args.learn_floor:
        make_dir(args.floors.parent, "--floors folder")
        for case in runnable:
            floors[label(case)] = g.floor_sides(new, case, device, args.learn_floor, args.budget / 3, args.builds,
                                                args.heap, threads)
            console.print(Text(f"{label(case)}: noise floor {floors[label(case)]:.2%}"))
        atomic_write_text(args.floors, document("noise-floors", floors))
        return 0

    verdicts = g.gate_sides(new, runnable, label, args, device, threads, floors)
    for v in verdicts:
        looks = v.run.looks[-1] if v.run.looks else {"seconds": 0.0}
        console.print(Text(f"{v.label}: median ratio {v.run.median:.3f} over {len(v.run.ratios)} pairs in "
                           f"{looks['seconds']:.1f}s ({v.run.faults_per_pair:.0f} page faults a pair), "
                           f"look {len(v.run.looks)} of {len(g.sequential.LOOKS)} "
                           f"(threshold +{v.threshold:.1%}, p={v.p:.2g} on the alpha scale) -> "
                           f"{'SLOWER' if v.slower else 'ok'}{''.join('; ' + n for n in v.notes)}",
                           style="bold red" if v.slower else ""))
    console.print(Text(how))
    if args.json:
        atomic_write_text(args.json, document("gate", [v.to_dict() for v in verdicts]))
    return 1 if any(v.slower for v in verdicts) else 0
