"""`perfsuite bisect`: the arguments, one call of perfsuite.jobs.bisect, and its answer (the first
commit between --good and --bad that made a workload slower, then why) with its exit status."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli import options
from perfsuite.cli.console import ConsoleListener
from perfsuite.cli.why import print_why
from perfsuite.compare import bisection as b
from perfsuite.compare.settings import GateSettings, WhyOptions
from perfsuite.core import registry
from perfsuite.core.params import single_values
from perfsuite.core.text import printable
from perfsuite.jobs.bisect import BisectRun, bisect
from perfsuite.stats import verdict

NAME = "bisect"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    bi = sub.add_parser(
        NAME,
        help="find the first-parent commit between --good and --bad that made a workload "
        "slower; exit 1 when it names one",
    )
    bi.add_argument("workload")
    bi.add_argument("--good", required=True, metavar="REV", help="a revision that is not slow")
    bi.add_argument("--bad", required=True, metavar="REV", help="a later revision that is slower (checked first)")
    options.params(bi)
    options.device(bi)
    options.budget(
        bi,
        15.0,
        "seconds per probe, as the gate's --max-time (default 15); a probe after "
        "the confirmation takes up to 4x that to tell good from bad",
    )
    options.threshold(
        bi, "smallest slowdown that counts, as the gate's (default 0.01; with --instructions 0.005)", None
    )
    options.sides(bi, "false alarms per probe of an unchanged commit", "of a probe, as the gate's")
    options.threads(bi)
    options.energy(bi)
    options.heap(bi)
    bi.add_argument(
        "--log",
        type=Path,
        default=None,
        help="the log of probes, resumed when it exists (default .perfsuite/bisect/WORKLOAD-GOOD-BAD.bisect.json)",
    )
    bi.add_argument("--no-why", action="store_true", help="do not profile the commit it names")
    bi.add_argument(
        "--faster",
        action="store_true",
        help="find the first commit that made it faster instead (--bad is then the faster revision)",
    )
    bi.add_argument(
        "--instructions",
        action="store_true",
        help="bisect by instructions per step instead of time (the CPU's hardware counter where a PMU counts, "
        "else Callgrind: about 45 s to start it, then seconds a commit for a small step): one count per commit, the same answer every time; --threshold is then the move in instructions "
        "(default 0.5%%); exit 1 when it names a commit that added instructions (with --faster, 0 for one "
        "that removed them)",
    )
    options.workloads_from(bi)
    options.variant(bi)
    options.why(bi)


def command(args, console, recorder) -> int:
    w = registry.get(args.workload)
    if args.instructions:
        return _by_count(args, console, w)
    threshold = GateSettings.threshold if args.threshold is None else args.threshold
    settings = GateSettings(
        args.budget, args.builds, threshold, args.fdr, args.threads, args.heap, args.variant, args.energy
    )
    with console.status("starting") as status:
        run = bisect(
            args.workload,
            args.good,
            args.bad,
            params=single_values(args.param, w),
            device=args.device,
            settings=settings,
            faster=args.faster,
            log=args.log,
            why=None if args.no_why else WhyOptions(args.steps, args.rounds, args.top),
            workloads_from=args.workloads_from,
            recorder=recorder,
            listener=ConsoleListener(console, status),
        )
    _print_why(run, console)
    # A slowdown found is the documented exit 1 (bad is confirmed slower, whichever commit did it); a
    # speed-up found is good news (0), unless the commit named rests on probes that could not tell
    # (EXIT_UNDECIDED: a named commit is never an exit 0 on a coin, issue 49). Bad not shown
    # changed: undecided (5), or shown not changed in that direction (0).
    if run.answer.state == b.UNDECIDED:
        return verdict.EXIT_UNDECIDED
    if run.answer.state != b.FOUND:
        return 0
    if run.direction > 0:
        return 1
    return verdict.EXIT_UNDECIDED if run.state.forced() else 0


def _by_count(args, console, w) -> int:
    """`--instructions`: one count per commit; the answer, exit 1 when a commit added instructions."""
    from perfsuite.compare.work import INSTRUCTION_THRESHOLD
    from perfsuite.jobs.count_bisect import count_bisect

    with console.status("counting") as status:
        run = count_bisect(
            args.workload,
            args.good,
            args.bad,
            params=single_values(args.param, w),
            device=args.device,
            threshold=INSTRUCTION_THRESHOLD if args.threshold is None else args.threshold,
            faster=args.faster,
            workloads_from=args.workloads_from,
            listener=ConsoleListener(console, status),
        )
    console.print(Text(printable(run.answer())), soft_wrap=True)
    named = run.first is not None or bool(run.range)
    return 1 if named and run.direction > 0 else 0


def _print_why(run: BisectRun, console) -> None:
    if run.why is not None:
        print_why(run.why, console)
        console.print(Text(f"why written to {run.why_file}"))
