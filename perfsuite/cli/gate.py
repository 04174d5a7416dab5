"""`perfsuite gate`: the interleaved regression gate against a base revision."""

from __future__ import annotations

from rich.text import Text

from perfsuite.cli import options
from perfsuite.compare import gate as g
from perfsuite.compare import gate_sides, sides
from perfsuite.core import registry
from perfsuite.core.case import Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.params import expand_sweep, parse_assignments
from perfsuite.core.text import printable
from perfsuite.measuring import heap
from perfsuite.measuring.system import pinned
from perfsuite.run.execute import Events, interrupted_exit
from perfsuite.stats import verdict
from perfsuite.storage.files import document, load_document
from perfsuite.storage.write import check_output, write_or_rescue

# The console's colour for each verdict word.
_STYLE = {verdict.SLOWER: "bold red", verdict.FASTER: "green", verdict.UNDECIDED: "yellow"}


NAME = "gate"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    gate = sub.add_parser(NAME, help="interleave a workload at a base revision and now; fail on a confirmed slowdown")
    gate.add_argument("workload")
    options.params(gate, sweep=True)
    gate.add_argument(
        "--base",
        "--base-ref",
        dest="base_ref",
        default="HEAD",
        help="git revision of the baseline workload code (default HEAD); each side runs in a "
        "process of its own, the base in a temporary worktree",
    )
    options.device(gate)
    options.budget(gate, 15.0, "seconds per case (default 15)")
    options.threshold(
        gate,
        "smallest slowdown that counts, as a fraction (default 0.01: two builds of the same "
        "code can differ by about 1%% through memory placement alone)",
    )
    options.fdr(
        gate,
        "false alarms per unchanged case, held across the sequential looks and, by Benjamini-Hochberg, across cases",
    )
    options.threads(
        gate,
        "torch threads while gating (default 1 on the CPU, as `run`: two or more stall at "
        "every barrier when another process is busy; torch's own on CUDA)",
    )
    options.builds(
        gate,
        None,
        "K",
        "processes of each side in each of the gate's rounds (default 1; each round's processes "
        "are fresh and count once in the interval); with --slowdown or --learn-floor, builds of each "
        "side the pairs rotate through (default 3)",
    )
    options.heap(
        gate,
        help="steady (default): glibc's malloc keeps freed memory, and the builds run until no "
        "page faults before the budget (cuts the pair noise ~4x on CPU); default: leave "
        "malloc as it is",
    )
    options.floors(gate, "noise floors per case, learned with --learn-floor")
    gate.add_argument(
        "--learn-floor",
        type=options.whole("--learn-floor", 0),
        default=0,
        metavar="RUNS",
        help="instead of gating, learn each case's noise floor from RUNS runs of the current code",
    )
    gate.add_argument(
        "--slowdown",
        type=options.fraction("--slowdown"),
        default=None,
        help="self-check: gate current code against itself slowed by this fraction, --trials times",
    )
    gate.add_argument("--trials", type=options.count("--trials"), default=10)
    gate.add_argument(
        "--undecided",
        choices=verdict.UNDECIDED_EXITS,
        default="report",
        help="what a case the pairs could not decide ends in: report (exit 5, the default), pass "
        "(exit 0: only a confirmed slowdown fails) or fail (exit 1: only same or faster passes)",
    )
    options.json_out(gate, help="write the verdicts as JSON (must not exist)")
    options.workloads_from(gate)


def command(args, console) -> int:
    """`perfsuite gate`: the self-check (--slowdown), learning noise floors, or the gate itself."""
    from perfsuite.core.config import resolve_device

    if args.threshold < 0:
        raise PerfsuiteError(f"--threshold must be >= 0, got {args.threshold}")
    if args.builds is None:  # rounds of one fresh process a side, or builds rotated in one process
        args.builds = g.BUILDS if args.slowdown is not None or args.learn_floor else g.ROUND_BUILDS
    if args.builds < 1:
        raise PerfsuiteError(f"--builds must be >= 1, got {args.builds}")
    if args.json is not None:  # checked before anything is measured: a verdict is never thrown away
        check_output(args.json, "--json")
    new = registry.get(args.workload)
    device = resolve_device(args.device)
    # One thread on the CPU unless asked, as every measurement (RunConfig.threads_on): six side
    # processes with two threads each on two cores made pairs 0.5-2.3x apart (bisect, 2026-11-26).

    threads = RunConfig(threads=args.threads).threads_on(device)
    # The self-check times both arms in this process, so this process holds the heap; otherwise
    # the sides hold their own (perfsuite.compare.side_worker) and this one only drives them.
    held = heap.apply(args.heap if args.slowdown is not None else "default")
    if args.slowdown is not None and args.heap == "steady" and held["heap"] != "steady":
        console.print(
            Text(f"--heap steady: not held ({held['reason']}); page faults stay in the pairs", style="yellow")
        )
    with pinned(None, threads):
        return gate_revisions(args, console, new, device, threads)


class _GateEvents(Events):
    """Prints what happens to each gated case; the verdicts themselves come after
    Benjamini-Hochberg has run across the cases."""

    def __init__(self, console, done=None) -> None:
        self.console, self.on_done = console, done

    def start(self, case) -> None:
        pass

    def done(self, case, result) -> None:
        if self.on_done is not None:
            self.on_done(case, result)

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed: {case.label}: {failure['error']}", style="red"))

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skipped {case.label}: {reason}", style="yellow"))

    def traced(self, case, trace, table) -> None:
        pass


def gate_revisions(args, console, new, device: str, threads: int | None) -> int:
    """Every case through the one case loop (perfsuite.run.execute.run_cases): the self-check,
    learning floors or the gate itself are only what one case measures."""
    from perfsuite.measuring.timing import clock_for
    from perfsuite.run.execute import Case, run_cases

    in_process = args.slowdown is not None  # the self-check times both arms here; a gate drives side processes
    how = (
        f"{args.budget:g}s per case, {args.builds} "
        + ("build(s)" if in_process else "process(es)")
        + " per side, "
        + (f"{threads} torch thread(s)" if threads else "torch's own threads")
        + (f", heap {heap.state()['heap']}" if in_process else f", heap {args.heap} in each side process")
    )
    cases = [Case(new, c) for c in expand_sweep(parse_assignments(args.param, new.params, new.name))]

    if args.slowdown is not None:
        if not 0 < args.slowdown < 1 or args.trials < 1:
            raise PerfsuiteError("--slowdown must be in (0, 1) and --trials >= 1")
        clock = clock_for(device, "host")  # host-inclusive: both versions pay the same sync

        def show(case, res) -> None:
            res["threads"] = threads
            res["heap"] = heap.state()
            lo, hi = g.wilson_interval(res["caught"], res["trials"])
            flo, fhi = g.wilson_interval(res["false_alarms"], res["trials"])
            console.print(
                Text(
                    f"{case.label}: injected {res['fraction_estimated']:.1%} ({res['matmuls_added']} matmuls): "
                    f"caught {res['caught']}/{res['trials']} (95% CI {lo:.0%}-{hi:.0%}); unchanged flagged "
                    f"{res['false_alarms']}/{res['trials']} (95% CI {flo:.0%}-{fhi:.0%}); {how}"
                )
            )

        measure: Measure = g.SelfCheck(args.slowdown, args.trials, args.threshold, args.builds, clock)
        out = run_cases(
            cases,
            RunConfig(device=device, max_time=args.budget),
            device,
            measure=measure,
            events=_GateEvents(console, show),
            outputs=(args.recorder,),
        )
        if args.json:
            write_or_rescue(args.json, document("gate-selfcheck", out.records, out.failures), "--json")
        return _ended(out, 0)

    floors = load_document(args.floors, "noise-floors") if args.floors.exists() else {}
    if args.learn_floor:

        def learned(case, floor) -> None:
            floors[case.label] = floor
            console.print(Text(f"{case.label}: noise floor {floor:.2%}"))

        check_output(args.floors, "--floors", replace=True)
        measure = gate_sides.NoiseFloor(args.learn_floor, args.builds, args.heap, threads)
        out = run_cases(
            cases,
            RunConfig(device=device, max_time=args.budget / 3),
            device,
            measure=measure,
            events=_GateEvents(console, learned),
        )
        write_or_rescue(args.floors, document("noise-floors", floors), "--floors")
        return _ended(out, 0)

    with console.status(f"checking out {args.base_ref}") as status:
        out = gate_sides.gate_sides(
            new,
            [c.params for c in cases],
            args.base_ref,
            device,
            threads,
            floors,
            budget=args.budget,
            builds=args.builds,
            heap_mode=args.heap,
            threshold=args.threshold,
            fdr=args.fdr,
            workloads_from=args.workloads_from,
            events=_GateEvents(console),
            progress=lambda text: status.update(Text(printable(text))),
        )
    for v in out.records:
        looks = v.run.looks[-1] if v.run.looks else {"seconds": 0.0}
        word = v.word
        console.print(
            Text(
                f"{v.label}: {v.describe()} over {len(v.run.ratios)} pairs in {looks['seconds']:.1f}s; "
                f"threshold +{v.threshold:.1%}"
                # p answers "slower?": beside another word it says nothing the interval does not
                + (f", p={v.p:.2g} on the alpha scale" if word in ("slower", "undecided") else "")
                + f", look {len(v.run.looks)} "
                f"of {len(g.sequential.LOOKS)}, {v.run.faults_per_pair:.0f} page faults a pair"
                f"{''.join('; ' + n for n in v.notes)}{verdict.advice(word)}",
                style=_STYLE.get(word, ""),
            )
        )
    clocks = {v.run.clock for v in out.records if v.run.clock}
    if clocks:
        how += "; timed by " + " and ".join(
            "the CPU time of each side's timing thread (one thread, steps that never wait: other work's preemption left out)"
            if c == sides.CPU_TIME
            else f"the wall clock ({c})"
            for c in sorted(clocks)
        )
    console.print(Text(how))
    if args.recorder is not None:
        for v in out.records:
            args.recorder.add_document("gate", v.to_dict(), workload=new.name)
    if args.json:
        write_or_rescue(args.json, document("gate", [v.to_dict() for v in out.records], out.failures), "--json")
    return _ended(out, verdict.exit_code([v.word for v in out.records], args.undecided))


def _ended(out, code: int) -> int:
    """Ctrl-C: 130; a confirmed slowdown: 1; else a case that failed: 3 (it was not gated); else
    a case the pairs could not decide: 5 (verdict.EXIT_UNDECIDED)."""
    if out.interrupted:
        return interrupted_exit(out.interrupted)
    if code == 1:
        return 1
    return 3 if out.failures else code
