"""`perfsuite history`: the arguments, one call of perfsuite.jobs.history per workload, and what
the history says (confirmed regressions with their operators, improvements, environment changes,
slow drifts) with the exit status CI reads."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import ConsoleListener
from perfsuite.cli.history_count import by_count
from perfsuite.compare.paired_history import History
from perfsuite.compare.settings import GateSettings, WhyOptions
from perfsuite.core import registry
from perfsuite.core.errors import ConfigError, PerfsuiteError, StorageError
from perfsuite.core.params import single_values
from perfsuite.core.text import printable
from perfsuite.frontends import asv_history
from perfsuite.jobs.history import history
from perfsuite.report.history_page import operator_changes

NAME = "history"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    hi = sub.add_parser(
        NAME,
        help="measure each first-parent commit of a range against the commit before it (paired, "
        "interleaved): confirmed regressions with their operators, an HTML page; exit 1 when a "
        "commit measured now is a confirmed regression",
    )
    hi.add_argument("workload", nargs="?", help="the workload (default: every workload of the project)")
    hi.add_argument("--range", dest="range_", metavar="A..B", help="the commits after A up to B (first-parent)")
    hi.add_argument(
        "--update",
        action="store_true",
        help="measure the commits that came since: the stored history's start up to HEAD (or B of --range)",
    )
    hi.add_argument(
        "--every",
        type=values.whole("--every", 1, 1000),
        default=1,
        metavar="N",
        help="measure every Nth commit (and the newest) against the one measured before it; a confirmed "
        "regression spanning several commits is bisected to the first slower one (default 1: every commit)",
    )
    hi.add_argument(
        "--max-commits",
        type=values.whole("--max-commits", 1, 10**6),
        default=100,
        metavar="N",
        help="refuse a plan of more than N commits to measure, saying what it would cost (default 100)",
    )
    options.params(hi)
    options.device(hi)
    options.budget(hi, 10.0, "seconds per pair of commits, as the gate's --max-time (default 10)")
    options.threshold(
        hi, "smallest slowdown that counts, as the gate's (default 0.01; with --instructions 0.005)", None
    )
    options.sides(hi, "false discoveries controlled across every commit of the history", "")
    options.threads(hi)
    options.energy(hi)
    options.heap(hi)
    hi.add_argument(
        "--log",
        type=Path,
        default=None,
        help="the history, resumed and extended when it exists (default .perfsuite/history/WORKLOAD-PARAMS.history.json)",
    )
    hi.add_argument("--html", type=Path, default=None, help="the page of the history (default beside the log)")
    options.floors(
        hi,
        "noise floors per case, learned with `gate --learn-floor`: a point is confirmed only beyond its "
        "case's floor (used when the file exists)",
    )
    hi.add_argument(
        "--asv",
        type=Path,
        default=None,
        metavar="ASV_CONF",
        help="also write the paired history into the results of this asv.conf.json: `asv publish` then "
        "draws it as perfsuite_history.WORKLOAD.CASE beside asv's own runs",
    )
    hi.add_argument("--no-why", action="store_true", help="do not profile the confirmed changes")
    hi.add_argument("--allow-dirty", action="store_true", help="measure although tracked files are modified")
    hi.add_argument(
        "--instructions",
        action="store_true",
        help="a history by instructions per step instead of time (the CPU's hardware counter where a PMU counts, "
        "else Callgrind: about 45 s to start it, then seconds a commit for a small step): one count per commit, each against the one before, kept in its own log (WORKLOAD-PARAMS.instructions.json; "
        "--update counts only the commits since); --threshold is then the move in instructions "
        "(default 0.5%%); exit 1 when a commit added instructions past it; each commit flagged is then "
        "gated by time against its parent",
    )
    hi.add_argument(
        "--count-only", action="store_true", help="with --instructions: do not gate the flagged commits by time"
    )
    options.workloads_from(hi)
    options.variant(hi)
    options.why(hi)


def command(args, console, recorder) -> int:
    names = [args.workload] if args.workload else [n for n in registry.names() if not registry.get(n).builtin]
    if not names:
        raise ConfigError("perfsuite history: name a workload (this project declares none of its own)")
    for flag in ("log", "html"):
        if getattr(args, flag) is not None and len(names) > 1:
            raise ConfigError(f"--{flag} names one history's file: name the workload too")
    if args.range_ is None and not args.update:
        raise ConfigError("give --range A..B, or --update to extend a stored history up to HEAD")
    if args.instructions:
        if len(names) > 1:
            raise ConfigError("--instructions counts one workload: name it")
        return by_count(args, console, registry.get(names[0]))
    code = 0
    for name in names:
        if len(names) == 1:
            return _one(name, args, console, recorder)
        try:
            code = max(code, _one(name, args, console, recorder))
        except (ConfigError, StorageError) as exc:  # one refused (no log to --update yet): the others go on
            console.print(Text(printable(f"{name}: not measured: {exc}"), style="yellow"), soft_wrap=True)
            code = max(code, 2)
    return code


def _one(name: str, args, console, recorder) -> int:
    """One workload's history: the library call, then its asv export and its summary."""
    if args.asv is not None:  # before any pair: a history is never lost to a bad --asv
        asv_history.preflight(args.asv)
    w = registry.get(name)
    threshold = 0.01 if args.threshold is None else args.threshold
    settings = GateSettings(
        args.budget, args.builds, threshold, args.fdr, args.threads, args.heap, args.variant, args.energy
    )
    with console.status("starting") as status:
        run = history(
            name,
            args.range_,
            update=args.update,
            params=single_values(args.param, w),
            device=args.device,
            settings=settings,
            every=args.every,
            max_commits=args.max_commits,
            log=args.log,
            html=args.html,
            floors=args.floors,
            why=None if args.no_why else WhyOptions(args.steps, args.rounds, args.top),
            allow_dirty=args.allow_dirty,
            workloads_from=args.workloads_from,
            recorder=recorder,
            listener=ConsoleListener(console, status),
        )
    exported = args.asv is None or _export_asv(run.state, args.asv, run.repo, run.log, console)
    _summary(run.state, console, run.page)
    return 1 if run.alarm else 0 if exported else 2  # a confirmed regression outranks a refused export


def _export_asv(state: History, conf: Path, repo: Path, log: Path, console) -> bool:
    """Whether the series reached asv's results; a refusal is said, the history itself kept."""
    try:
        written = asv_history.export(state, conf, repo)
    except (PerfsuiteError, OSError, ValueError) as exc:  # the history is saved: say so, go on
        said = f"asv: not exported ({exc}); nothing measured is lost: the history is saved in {log} (once fixed, "
        console.print(Text(printable(said + "the same command exports it without measuring again)"), style="yellow"))
        return False
    if written:
        console.print(
            Text(
                printable(
                    f"asv: {len(written)} commit(s) of {asv_history.benchmark_name(state)} written beside "
                    f"{written[0].parent}; `asv publish` draws them"
                )
            )
        )
    return True


def top_operators(why: dict | None, n: int = 3) -> list[str]:
    """The first `n` operators of a stored why, with their change per step."""
    return [f"{name} {delta:+.0f} us" for name, delta in operator_changes(why, n)]


def _summary(state: History, console, page: Path) -> None:
    """What the history says, after its walk: confirmed regressions with their top operators,
    improvements, environment changes, slow drifts, and where its page is."""
    regressions, improvements = state.regressions(), state.improvements()
    if regressions:
        console.print(Text(f"confirmed regressions ({len(regressions)}):", style="bold red"))
        for p in regressions:
            ops = top_operators(p.why)
            where = f"{p.blamed[:12]} {state.subject_of(p.blamed)}"
            if p.culprit:
                where += f" (bisected inside {p.parent[:12]}..{p.sha[:12]})"
            console.print(
                Text(
                    printable(
                        f"  {where}: {p.evidence.describe()}"  # type: ignore[union-attr]
                        + (f"; top operators: {', '.join(ops)}" if ops else "")
                    )
                )
            )
    else:
        console.print(Text("no confirmed regression"))
    for p in improvements:
        console.print(Text(printable(f"  improved: {p.sha[:12]} {state.subject_of(p.sha)}: {p.evidence.describe()}")))  # type: ignore[union-attr]
    for sha, what in state.env_changes():
        console.print(
            Text(printable(f"  environment changed at {sha[:12]}: {what} (not blamed on the code)"), style="yellow")
        )
    drift = state.drifts()
    for w in drift:
        ops = top_operators(w.why)
        console.print(
            Text(
                printable(
                    f"  slow drift {w.start[:12]}..{w.end[:12]}: {w.evidence.describe()}"
                    + (f"; {w.bisection}" if w.bisection else "")
                    + (f" ({w.culprit[:12]}: {state.subject_of(w.culprit)})" if w.culprit else "")
                    + (f"; top operators: {', '.join(ops)}" if ops else "")
                ),
                style="bold red",
            )
        )
    console.print(Text(f"page: {page}"))
