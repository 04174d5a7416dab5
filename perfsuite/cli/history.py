"""`perfsuite history`: every first-parent commit of a range against the one before it, then what
the points say (confirmed regressions with their operators, improvements, environment changes, a
slow drift), a page, and the exit status CI reads."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

from rich.text import Text

from perfsuite.cli import options
from perfsuite.compare import bisect as b
from perfsuite.compare import revisions, sides
from perfsuite.compare.bisect_probe import Prober, subject
from perfsuite.compare.gate import GateVerdict
from perfsuite.compare.history import (
    HISTORY_RULE,
    MEASURED,
    RECHECK_BUDGET,
    SCREEN_ALPHA,
    History,
    Point,
    Window,
)
from perfsuite.compare.history_walk import PairProber, dirty, range_commits, walk
from perfsuite.compare.why_sides import why_commits
from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.errors import ConfigError, PerfsuiteError, RecordError, StorageError
from perfsuite.core.params import single_values
from perfsuite.core.text import printable
from perfsuite.frontends import asv_history
from perfsuite.measuring.env import comparable, fingerprint
from perfsuite.report.history_page import operator_changes, write_page
from perfsuite.run.execute import runnable
from perfsuite.storage.files import document, load_document
from perfsuite.storage.write import check_output, check_output_dir, try_lock, write_or_rescue

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
        type=options.whole("--every", 1, 1000),
        default=1,
        metavar="N",
        help="measure every Nth commit (and the newest) against the one measured before it; a confirmed "
        "regression spanning several commits is bisected to the first slower one (default 1: every commit)",
    )
    hi.add_argument(
        "--max-commits",
        type=options.whole("--max-commits", 1, 10**6),
        default=100,
        metavar="N",
        help="refuse a plan of more than N commits to measure, saying what it would cost (default 100)",
    )
    options.params(hi)
    options.device(hi)
    options.budget(hi, 10.0, "seconds per pair of commits, as the gate's --max-time (default 10)")
    options.threshold(hi)
    options.sides(hi, "false discoveries controlled across every commit of the history", "")
    options.threads(hi)
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
    options.workloads_from(hi)
    options.why(hi)


def command(args, console) -> int:
    names = [args.workload] if args.workload else [n for n in registry.names() if not registry.get(n).builtin]
    if not names:
        raise ConfigError("perfsuite history: name a workload (this project declares none of its own)")
    for flag in ("log", "html"):
        if getattr(args, flag) is not None and len(names) > 1:
            raise ConfigError(f"--{flag} names one history's file: name the workload too")
    if args.range_ is None and not args.update:
        raise ConfigError("give --range A..B, or --update to extend a stored history up to HEAD")
    code = 0
    for name in names:
        if len(names) == 1:
            return _one(name, args, console)
        try:
            code = max(code, _one(name, args, console))
        except (
            ConfigError,
            StorageError,
        ) as exc:  # one refused (no log to --update yet, its base broken): the others go on
            console.print(Text(printable(f"{name}: not measured: {exc}"), style="yellow"), soft_wrap=True)
            code = max(code, 2)
    return code


def _one(name: str, args, console) -> int:
    from perfsuite.core.config import RunConfig, resolve_device

    w = registry.get(name)
    params = w.resolve(single_values(args.param, w))
    device = resolve_device(args.device)
    threads = RunConfig(threads=args.threads).threads_on(device)  # 1 on the CPU, as the gate
    runnable([Case(w, params)], device)
    with revisions.Revisions(w, args.workloads_from) as revs, contextlib.ExitStack() as held:
        changed = dirty(revs.repo)
        if changed and not args.allow_dirty:
            raise ConfigError(
                f"{revs.repo} has uncommitted changes ({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}): "
                "a history is of commits; commit or stash them, or give --allow-dirty"
            )
        floors = load_document(args.floors, "noise-floors") if args.floors.exists() else {}
        floor = floors.get(Case(w, params).label)
        settings = {
            "floor": floor,  # what the points are judged beyond: a relearned floor is another question
            "max_time": args.budget,
            "builds": args.builds,
            "threshold": args.threshold,
            "fdr": args.fdr,
            "threads": threads,
            "heap": args.heap,
            "rule": HISTORY_RULE,
            "every": args.every,
            "workloads_from": revs.mode
            if revs.mode in (revisions.TREE, revisions.REVISION)
            else revisions.resolve_commit(revs.mode, revs.repo, "--workloads-from"),
        }
        log = args.log or Path(".perfsuite") / "history" / _log_name(w.name, params)
        check_output(log, "--log", replace=True)  # before any pair: a measured point is never lost to its log
        held.callback(os.close, _hold(log))  # before reading it: one run at a time writes a log
        page = args.html or log.with_name(log.name.removesuffix(".json").removesuffix(".history") + ".html")
        if page.resolve() == log.resolve():
            raise ConfigError(f"--html {page}: the same file as the history's log; the page would replace it")
        check_output(page, "--html", replace=True)
        if args.asv is not None:  # before any pair: a history is never lost to a bad --asv
            check_output_dir(asv_history.results_dir(args.asv), "--asv's results folder")
        stored = _stored(log)
        start_rev, end_rev = _range(args, stored)
        start = revisions.resolve_commit(start_rev, revs.repo, "--range")
        if stored is not None and args.update and start != stored.base.sha:
            raise ConfigError(
                f"--update --range {args.range_}: the stored history starts at {stored.base.sha[:12]}, "
                f"not at {start[:12]}; give no --range, or --range {stored.base.sha[:12]}..REV"
            )
        end = revisions.resolve_commit(end_rev, revs.repo, "--range")
        if start == end:
            raise ConfigError(f"--range {start_rev}..{end_rev}: the same commit, no commit after it to measure")
        base, commits = range_commits(revs.repo, start, end)
        missing = revs.missing_at(base.sha)
        if missing:  # the range's start is every later pair's first base
            raise ConfigError(f"--range: its start {base.sha[:12]}: {missing}")
        state = History(w.name, params, device, base, commits, settings)
        if stored is not None:
            if not state.same_question(stored):
                differ = [
                    k for k in sorted(set(stored.settings) | set(settings)) if stored.settings.get(k) != settings.get(k)
                ]
                what = (
                    f"settings differ: {', '.join(differ)}"
                    if differ
                    else "workload, parameters, device or start differ"
                )
                raise ConfigError(
                    f"--log {log}: the history of another question ({what}); remove it or give another --log"
                )
            state = stored.extended(commits)
        pending = state.pending()
        cost_s = len(pending) * pair_cost_s(state, args.budget)
        if len(pending) > args.max_commits:  # issue 50: --update once planned 874 commits, five hours, unsaid
            raise ConfigError(
                f"{len(pending)} commits to measure after {base.sha[:12]} up to {end[:12]}, about "
                f"{_duration(cost_s)}: more than --max-commits {args.max_commits}. Give --max-commits "
                f"{len(pending)} to measure them all, --every K to measure every K-th (a confirmed change "
                "is bisected inside its span), or a shorter --range"
            )
        console.print(
            Text(
                printable(
                    f"history of {w.name} {_params(params)} on {device}: {len(commits)} commit(s) after "
                    f"{base.sha[:12]} up to {end[:12]}, {len(pending)} to measure, each against the one before, "
                    f"about {_duration(cost_s)} (rechecks of changes come on top); log {log}"
                    + (f"; noise floor {floor:.2%} from {args.floors}" if floor else "")
                )
            )
        )
        env = comparable(fingerprint(device=device))
        with (
            console.status("starting") as status,
            sides.placed(device, threads),
            PairProber(
                w,
                params,
                revs,
                device,
                budget_s=args.budget,
                builds=args.builds,
                threshold=args.threshold,
                threads=threads,
                heap=args.heap,
                fdr=args.fdr,
                floors=floors,
                progress=lambda text: status.update(Text(printable(text))),
                screen_alpha=SCREEN_ALPHA,
            ) as prober,
        ):
            new = walk(
                state,
                prober.pair,
                env,
                lambda s, p: _logged(s, p, log, console),
                prober.keep_only,
                _bisector(w, params, revs, device, threads, args, console, floor),
                lambda a, b: _rechecked(prober, a, b, args.budget * RECHECK_BUDGET, console),
            )
        state.confirm()
        fresh = {p.sha for p in new if p.outcome == MEASURED}
        if not args.no_why:
            profile = lambda a, b: _why(w, params, revs, a, b, device, threads, args, console)  # noqa: E731
            # this run's confirmed changes and drifts, and any a resumed run left unprofiled
            changes: list[Point | Window] = [*state.regressions(), *state.improvements(), *state.drifts()]
            for x in changes:
                if x.why is None:
                    x.why = profile(*_profiled_ends(x, state))
                    _save(state, log)  # each profile as it ends: Ctrl-C during the next keeps it
        _save(state, log)
        write_or_rescue(page, write_page(state), "--html")
        written: list[Path] = []
        if args.asv is not None:
            try:
                written = asv_history.export(state, args.asv, revs.repo)
            except (PerfsuiteError, OSError, ValueError) as exc:  # the history is saved: say so, go on
                console.print(
                    Text(f"asv: not exported ({printable(str(exc))}); the history is in {log}", style="yellow")
                )
        if written:
            console.print(
                Text(
                    printable(
                        f"asv: {len(written)} commit(s) of {asv_history.benchmark_name(state)} written beside "
                        f"{written[0].parent}; `asv publish` draws them"
                    )
                )
            )
        if getattr(args, "recorder", None) is not None:  # one store for every road
            args.recorder.add_document("history", state.to_dict(), workload=w.name)
    code = _summary(state, fresh, console, page)
    _save(state, log)  # with `reported`: a later run's exit is about what comes after this one
    return code


# A pair's wall time as a share of its budget, before a log has timed its own: a 15 s gate took
# 20-27 s on the development VM (forks, builds, the heap's settling; reports/gate/load/).
PAIR_OVERHEAD = 1.8


def pair_cost_s(state, budget_s: float) -> float:
    """Seconds one more pair is expected to take: the median gap between the stored points' times
    of measurement when the log holds at least three (this machine, this workload), else
    PAIR_OVERHEAD times the budget."""
    from datetime import datetime

    from perfsuite.stats.summary import median

    stamps = []
    for p in state.points:
        try:
            stamps.append(datetime.fromisoformat(p.measured_at).timestamp())
        except (TypeError, ValueError):
            continue
    gaps = [b - a for a, b in zip(stamps, stamps[1:]) if 0 < b - a < 3600]
    return median(gaps) if len(gaps) >= 2 else PAIR_OVERHEAD * budget_s


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def _rechecked(prober: PairProber, a: str, b: str, budget_s: float, console) -> GateVerdict | str:
    """Stage 2 of the confirmation: `b` against `a` paired anew, in rounds of fresh processes, for
    longer (History.confirm)."""
    console.print(
        Text(f"{a[:12]}..{b[:12]}: screened as a change; rechecking in rounds of fresh processes for {budget_s:g}s")
    )
    got = prober.recheck(a, b, budget_s)
    if isinstance(got, str):
        console.print(Text(printable(f"{b[:12]}: the recheck could not be measured ({got[:300]})"), style="yellow"))
    return got


def _bisector(w, params, revs, device: str, threads, args, console, floor: float | None):
    """Bisection inside a confirmed change that spans several commits (a point of --every N, a
    slow drift): bisect's own probes (perfsuite.compare.bisect_probe), the span's start as good,
    its end as bad, at the history's threshold or the case's learned floor, the larger (as the
    points were judged). Bad is not probed again: the recheck that confirmed the span is its
    confirmation (its pairs set the halfway line the commits inside are classified by)."""
    threshold = max(args.threshold, floor or 0.0)

    def run(
        parent: str, span: list, confirmation: GateVerdict, drift: bool, direction: int = 1
    ) -> tuple[str | None, str]:
        settings = {"max_time": args.budget, "builds": args.builds, "threshold": threshold, "fdr": args.fdr,
                    "threads": threads, "heap": args.heap, "rule": b.PROBE_RULE,
                    "direction": "slower" if direction > 0 else "faster"}  # fmt: skip
        state = b.Bisection(w.name, params, device, b.Commit(parent, subject(revs.repo, parent)), span, settings)
        state.probes.append(b.Probe(span[-1].sha, b.CHANGED, confirmation))
        console.print(Text(f"bisecting the {len(span)} commits after {parent[:12]} up to {span[-1].sha[:12]}"))
        with Prober(
            w, params, revs, parent, device, budget_s=args.budget, builds=args.builds, threshold=threshold,
            threads=threads, heap=args.heap, fdr=args.fdr, direction=direction,
        ) as prober:  # fmt: skip
            answer = b.run_bisection(state, prober)
        return _bisected_as(state, answer, drift, direction)

    return run


def _bisected_as(state, answer, drift: bool, direction: int = 1) -> tuple[str | None, str]:
    """(the commit a bisection inside a confirmed span names, or None; the line saying so). Bad's
    probe is the recheck's, so the answer is always found; it names nobody when skipped commits
    before it could have been first instead (the change stays on its span), and says how many of
    its probes were put by their median."""
    assert answer.state == b.FOUND and answer.commit is not None  # bad was confirmed
    probes = len(state.probes) - 1  # bad's confirmation was the recheck's
    what = "first commit like its end" if drift else "first slower commit" if direction > 0 else "first faster commit"
    if answer.could_also_be:
        could = ", ".join(c.sha[:12] for c in answer.could_also_be)
        return None, (
            f"bisected inside: {what} {answer.commit.sha[:12]} or one of the skipped commits before it ({could}); "
            "the change stays on its span"
        )
    line = f"bisected inside: {what} {answer.commit.sha[:12]} after {probes} probe(s)"
    forced = state.forced()
    if forced:
        line += (
            f"; uncertain: {len(forced)} probe(s) could not tell its start from its end and were put by their median"
        )
    return answer.commit.sha, line


def _log_name(name: str, params: dict) -> str:
    """A name made safe for a path (a user's name never leaves .perfsuite/history/), and the
    parameters' digest: each case has its own history."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "workload"
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{safe}-{digest}.history.json"


def _params(params: dict) -> str:
    return "[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"


def _hold(log: Path) -> int:
    """The log's lock (LOG.lock beside it) for this run: a second run on the same log (two CI
    jobs that overlap) would read the same points and the last to save would drop the other's."""
    fd = try_lock(log.with_name(log.name + ".lock"))
    if fd is None:
        raise ConfigError(
            f"--log {log}: another perfsuite history is measuring into it; wait for it to end or give another --log"
        )
    return fd


def _stored(log: Path) -> History | None:
    if not log.exists():
        return None
    try:
        (old,) = load_document(log, "history")[:1]
    except (RecordError, ValueError) as exc:
        raise ConfigError(f"--log {log}: not a readable history ({exc}); it is left as it is") from None
    if old.settings.get("rule") != HISTORY_RULE:
        raise ConfigError(
            f"--log {log}: written under rule {old.settings.get('rule')!r} of confirming a regression, and this "
            f"perfsuite confirms by rule {HISTORY_RULE} (docs/history.md): its points would not be judged alike; "
            "it is left as it is: remove it or give another --log"
        )
    return old


def _range(args, stored: History | None) -> tuple[str, str]:
    if args.range_ is not None:
        if args.range_.count("..") != 1 or "..." in args.range_:
            raise ConfigError(f"--range {args.range_!r}: expected A..B (two revisions, the first older)")
        a, b = args.range_.split("..")
        if not a or not b:
            raise ConfigError(f"--range {args.range_!r}: expected A..B with both revisions named")
        return a, b
    if stored is None:
        raise ConfigError("--update: no stored history to extend; start one with --range A..B")
    return stored.base.sha, "HEAD"


def _save(state: History, log: Path) -> None:
    write_or_rescue(log, document("history", [state.to_dict()]), "--log")


def _logged(state: History, p: Point | Window, log: Path, console) -> None:
    _save(state, log)
    if isinstance(p, Window):
        said = f"rechecked: {p.recheck.describe()}" if p.recheck else f"gated end against start: {p.verdict.describe()}"
        if p.bisection:  # a bisection inside the confirmed drift has ended
            said += f"; {printable(p.bisection)}"
        console.print(
            Text(f"slow drift {p.start[:12]}..{p.end[:12]} {said}", style="bold red" if p.verdict.confirmed else "")
        )
        return
    subject = printable(state.subject_of(p.sha))
    if p.bisection:  # a bisection inside the point has ended
        console.print(Text(f"{p.parent[:12]}..{p.sha[:12]}: {printable(p.bisection)}"))
        return
    if p.recheck is not None:  # stage 2 has ended
        console.print(Text(f"{p.sha[:12]} {subject}: rechecked: {p.recheck.describe()} against {p.parent[:12]}"))
        return
    if p.outcome != MEASURED or p.verdict is None:
        first = printable((p.error.splitlines() or [""])[0])
        if len(first) > 300:  # the end of an error says what went wrong; its start, where
            first = "..." + first[-300:]
        console.print(Text(f"{p.sha[:12]} {subject}: skipped ({first})", style="yellow"))
        return
    console.print(Text(f"{p.sha[:12]} {subject}: {p.verdict.describe()} against {p.parent[:12]} [{p.seconds:.0f}s]"))


def _profiled_ends(x: Point | Window, state: History) -> tuple[str, str]:
    """What `why` compares for a confirmed change: a point's commit against the one before it (the
    commit a bisection inside it named, against its own predecessor); a drift's end against its start."""
    if isinstance(x, Window):
        return x.start, x.end
    if not x.culprit:
        return x.parent, x.sha
    shas = [c.sha for c in state.commits]
    i = shas.index(x.culprit)
    return (shas[i - 1] if i > 0 else state.base.sha), x.culprit


def _why(w, params, revs, before: str, after: str, device: str, threads, args, console) -> dict | None:
    """The differential profile of a confirmed change (operators and memory), to attach to it."""
    console.print(Text(f"why: profiling {before[:12]} against {after[:12]}"))
    try:
        result = why_commits(
            w,
            params,
            revs,
            before,
            after,
            device,
            threads=threads,
            steps=args.steps,
            rounds=args.rounds,
            top=args.top,
        )
    except PerfsuiteError as exc:  # the change is confirmed and logged already
        console.print(Text(f"why could not profile {after[:12]}: {printable(str(exc))}", style="yellow"))
        return None
    return result.to_dict()


def top_operators(why: dict | None, n: int = 3) -> list[str]:
    """The first `n` operators of a stored why, with their change per step."""
    return [f"{name} {delta:+.0f} us" for name, delta in operator_changes(why, n)]


def _summary(state: History, fresh: set[str], console, page: Path) -> int:
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
    # CI fails on what was confirmed since the last exit status given (this run's, or a killed
    # run's), and, when this run measured nothing new, on a newest commit that carries a regression.
    measured = state.measured()
    newest = set() if fresh else ({measured[-1].sha} if measured else set())
    news = state.confirmed_now()
    state.reported = state.walks  # said now
    return 1 if news or any(p.sha in newest for p in regressions) or any(w.end in newest for w in drift) else 0
