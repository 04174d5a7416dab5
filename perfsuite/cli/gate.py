"""`perfsuite gate`: the arguments, one call of perfsuite.jobs.gate (the gate, learning noise
floors, or the self-check), and its verdicts with the exit status CI reads."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import ConsoleListener, make_console
from perfsuite.cli.events import GateEvents
from perfsuite.compare import paired_gate as g
from perfsuite.compare import sides, work
from perfsuite.compare.settings import GateSettings
from perfsuite.core import registry
from perfsuite.core.errors import ConfigError
from perfsuite.core.params import expand_sweep, parse_assignments
from perfsuite.core.text import printable
from perfsuite.jobs import gate as jobs
from perfsuite.run.execute import interrupted_exit
from perfsuite.stats import verdict
from perfsuite.storage.files import document
from perfsuite.storage.folder import Reserved

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
    gate.add_argument(
        "--commit",
        default=None,
        metavar="REV",
        help="gate REV against its own first parent (both in temporary worktrees) instead of the working "
        "tree against --base: did this commit make it slower?",
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
    options.energy(gate)
    options.heap(
        gate,
        help="steady (default): glibc's malloc keeps freed memory, and the builds run until no "
        "page faults before the budget (cuts the pair noise ~4x on CPU); default: leave "
        "malloc as it is",
    )
    options.floors(gate, "noise floors per case, learned with --learn-floor")
    gate.add_argument(
        "--learn-floor",
        type=values.whole("--learn-floor", 0),
        default=0,
        metavar="RUNS",
        help="instead of gating, learn each case's noise floor from RUNS runs of the current code",
    )
    gate.add_argument(
        "--slowdown",
        type=values.fraction("--slowdown"),
        default=None,
        help="self-check: gate current code against itself slowed by this fraction, --trials times",
    )
    gate.add_argument("--trials", type=values.count("--trials"), default=10)
    gate.add_argument(
        "--undecided",
        choices=verdict.UNDECIDED_EXITS,
        default="report",
        help="what a case the pairs could not decide ends in: report (exit 5, the default), pass "
        "(exit 0: only a confirmed slowdown fails) or fail (exit 1: only same or faster passes)",
    )
    options.json_out(gate, help="write the verdicts as JSON (must not exist)")
    options.workloads_from(gate)
    options.variant(gate)


def command(args, console, recorder) -> int:
    """`perfsuite gate`: the self-check (--slowdown), learning noise floors, or the gate itself."""
    # Checked before anything is measured: a verdict is never thrown away.
    json_out = Reserved(args.json, "--json") if args.json is not None else None
    w = registry.get(args.workload)
    cases = expand_sweep(parse_assignments(args.param, w.params, w.name))
    builds = args.builds or (g.BUILDS if args.slowdown is not None or args.learn_floor else g.ROUND_BUILDS)
    settings = GateSettings(
        args.budget, builds, args.threshold, args.fdr, args.threads, args.heap, args.variant, args.energy
    )
    if args.commit is not None and (args.base_ref != "HEAD" or args.slowdown is not None or args.learn_floor):
        raise ConfigError(
            "--commit gates a commit against its own parent: it takes no --base, --slowdown or --learn-floor"
        )
    if args.variant is not None and (args.slowdown is not None or args.learn_floor):
        raise ConfigError(
            "--variant gates a variant at two revisions; the self-check and --learn-floor time the step itself"
        )
    if args.slowdown is not None:
        return _self_check(args, console, recorder, cases, settings, json_out)
    if args.learn_floor:
        learned = lambda case, floor: console.print(Text(f"{case.label}: noise floor {floor:.2%}"))  # noqa: E731
        out, _ = jobs.learn_floors(args.workload, args.learn_floor, cases=cases, device=args.device,
                                   settings=settings, floors=args.floors, events=GateEvents(console, learned))  # fmt: skip
        return _ended(out, 0)
    with console.status(f"checking out {args.commit or args.base_ref}") as status:
        run = jobs.gate(args.workload, args.base_ref, cases=cases, device=args.device, settings=settings,
                        floors=args.floors, workloads_from=args.workloads_from, events=GateEvents(console),
                        progress=lambda text: status.update(Text(printable(text))), commit=args.commit)  # fmt: skip
    out = run.outcome
    for v in out.records:
        console.print(Text(verdict_line(v), style=_STYLE.get(v.word, "")))
    clocks = {v.run.clock for v in out.records if v.run.clock}
    how = run.how
    if clocks:
        how += "; timed by " + " and ".join(
            "the CPU time of each side's timing thread (one thread, steps that never wait: other work's preemption left out)"
            if c == sides.CPU_TIME
            else f"the wall clock ({c})"
            for c in sorted(clocks)
        )
    console.print(Text(how))
    if recorder is not None:
        for v in out.records:
            recorder.add_document("gate", v.to_dict(), workload=w.name)
    if json_out is not None:
        json_out.write(document("gate", [v.to_dict() for v in out.records], out.failures))
    if not out.records and not out.failures and not out.interrupted:
        # Every case skipped (a variant its step cannot take, a case this device refuses): nothing
        # was compared, and exit 0 would pass a CI job on a gate that measured nothing.
        make_console(stderr=True).print(
            Text("error: ", style="bold red") + Text("no case was compared; the reasons are above")
        )
        return 2
    return _ended(out, verdict.exit_code([v.word for v in out.records], args.undecided))


def verdict_line(v) -> str:
    """One case's verdict as the console says it: word, ratio and interval, pairs, looks, faults."""
    looks = v.run.looks[-1] if v.run.looks else {"seconds": 0.0}
    return (
        f"{v.label}: {v.describe(with_work=False, with_energy=False)} over {len(v.run.ratios)} pairs in {looks['seconds']:.1f}s; "
        f"threshold +{v.threshold:.1%}"
        # p answers "slower?": beside another word it says nothing the interval does not
        # p on the alpha scale (issue 50: "p=1 on the alpha scale" was unexplained): the sequential
        # test's p, scaled so that it is below --fdr exactly when the test confirmed the change.
        + (f", p={v.p:.2g} (confirmed when below --fdr {v.alpha:g})" if v.word in ("slower", "undecided") else "")
        + f", look {len(v.run.looks)} "
        f"of {len(g.sequential.LOOKS)}, {v.run.faults_per_pair:.0f} page faults a pair"
        f"{''.join('; ' + n for n in v.notes)}"
        f"{'' if v.work == work.UNKNOWN else '; ' + work.said(v.work, v.work_changes, v.word)}"
        f"{'' if v.energy is None else '; ' + v.energy.describe()}"
        f"{verdict.advice(v.word)}"
    )


def _self_check(args, console, recorder, cases, settings: GateSettings, json_out: Reserved | None) -> int:
    def show(case, res) -> None:
        lo, hi = g.wilson_interval(res["caught"], res["trials"])
        flo, fhi = g.wilson_interval(res["false_alarms"], res["trials"])
        console.print(
            Text(
                f"{case.label}: injected {res['fraction_estimated']:.1%} ({res['matmuls_added']} matmuls): "
                f"caught {res['caught']}/{res['trials']} (95% CI {lo:.0%}-{hi:.0%}); unchanged flagged "
                f"{res['false_alarms']}/{res['trials']} (95% CI {flo:.0%}-{fhi:.0%}); "
                + jobs.how_measured(replace(settings, threads=res["threads"]), in_process=True)
            )
        )

    run = jobs.self_check(args.workload, args.slowdown, args.trials, cases=cases, device=args.device,
                          settings=settings, events=GateEvents(console, show), recorder=recorder,
                          listener=ConsoleListener(console))  # fmt: skip
    if json_out is not None:
        json_out.write(document("gate-selfcheck", run.outcome.records, run.outcome.failures))
    return _ended(run.outcome, 0)


def _ended(out, code: int) -> int:
    """Ctrl-C: 130; a confirmed slowdown: 1; else a case that failed: 3 (it was not gated); else
    a case the pairs could not decide: 5 (verdict.EXIT_UNDECIDED)."""
    if out.interrupted:
        return interrupted_exit(out.interrupted)
    if code == 1:
        return 1
    return 3 if out.failures else code
