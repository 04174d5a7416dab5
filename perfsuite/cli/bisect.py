"""`perfsuite bisect`: the first commit between --good and --bad that made a workload slower, then why."""

from __future__ import annotations

import math
from pathlib import Path

from rich.text import Text

from perfsuite.cli import options
from perfsuite.cli.why import print_why
from perfsuite.compare import bisect as b
from perfsuite.compare import revisions, sides
from perfsuite.compare.bisect import UNDECIDED
from perfsuite.compare.bisect_probe import MAX_BUDGETS, Prober, first_parent_commits, subject
from perfsuite.compare.why_sides import why_commits
from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.errors import ConfigError, PerfsuiteError, RecordError
from perfsuite.core.params import single_values
from perfsuite.core.text import printable
from perfsuite.run.execute import runnable
from perfsuite.stats import verdict
from perfsuite.storage.files import document, load_document
from perfsuite.storage.write import check_output, write_or_rescue

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
    options.threshold(bi)
    options.sides(bi, "false alarms per probe of an unchanged commit", "of a probe, as the gate's")
    options.threads(bi)
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
    options.workloads_from(bi)
    options.why(bi)


def command(args, console) -> int:
    from perfsuite.core.config import RunConfig, resolve_device

    if args.threshold < 0:
        raise ConfigError(f"--threshold must be >= 0, got {args.threshold}")
    w = registry.get(args.workload)
    params = w.resolve(single_values(args.param, w))
    device = resolve_device(args.device)
    args.threads = RunConfig(threads=args.threads).threads_on(device)  # 1 on the CPU, as the gate
    runnable([Case(w, params)], device)
    direction, change = (-1, "faster") if args.faster else (1, "slower")
    with revisions.Revisions(w, args.workloads_from) as revs:
        good = revisions.resolve_commit(args.good, revs.repo, "--good")
        bad = revisions.resolve_commit(args.bad, revs.repo, "--bad")
        commits = first_parent_commits(revs.repo, good, bad)
        for flag, rev, sha in (("--good", args.good, good), ("--bad", args.bad, bad)):
            missing = revs.missing_at(sha)
            if missing:
                raise ConfigError(f"{flag} {rev}: {missing}")
        settings = {
            "max_time": args.budget,
            "builds": args.builds,
            "threshold": args.threshold,
            "fdr": args.fdr,
            "threads": args.threads,
            "heap": args.heap,
            "rule": b.PROBE_RULE,
            "direction": change,
            "workloads_from": revs.mode
            if revs.mode in (revisions.TREE, revisions.REVISION)
            else revisions.resolve_commit(revs.mode, revs.repo),
        }
        state = b.Bisection(w.name, params, device, b.Commit(good, subject(revs.repo, good)), commits, settings)
        log = args.log or Path(".perfsuite") / "bisect" / _log_name(w.name, good, bad, change, params)
        # Before any probe (and before resuming from it): a measured probe is never lost to its log.
        check_output(log, "--log", replace=True)
        _resume(state, log, console)

        probes = math.ceil(math.log2(len(commits)))  # bad is known changed once confirmed: halve the rest
        console.print(
            Text(
                f"bisecting {len(commits)} first-parent commit(s) of {revs.repo} after {good[:12]} up to "
                f"{bad[:12]} for the first {change} one: confirming --bad, then about {probes} probe(s), "
                f"{args.budget:g}-{MAX_BUDGETS * args.budget:g}s each plus start-up; workload file from "
                f"{_from(revs)}; log {log}"
            )
        )
        with (
            console.status("starting") as status,
            sides.placed(device, args.threads),
            Prober(
                w,
                params,
                revs,
                good,
                device,
                budget_s=args.budget,
                builds=args.builds,
                threshold=args.threshold,
                threads=args.threads,
                heap=args.heap,
                fdr=args.fdr,
                direction=direction,
                progress=lambda text: status.update(Text(printable(text))),
            ) as prober,
        ):
            answer = b.run_bisection(state, prober, lambda s, p: _logged(s, p, log, console))
        _save(state, log, answer)
        if args.recorder is not None:  # the finished bisection, with its answer, in the store's history
            d = state.to_dict()
            args.recorder.add_document("bisect", {**d, "answer": answer.to_dict()}, workload=w.name)
        for c in answer.skipped:
            console.print(
                Text(
                    f"skipped {c.sha[:12]} {printable(c.subject)}: {c.error.splitlines()[0] if c.error else ''}",
                    style="yellow",
                )
            )
        if answer.state != b.FOUND:
            return _not_found(answer, args, change, console)
        assert answer.commit is not None  # found
        console.print(
            Text(
                f"first {change} commit: {answer.commit.sha[:12]} {printable(answer.commit.subject)}",
                style="bold red" if direction > 0 else "bold green",
            )
        )
        console.print(Text(f"  against --good: {_effect(answer.probe)}"))
        forced = state.forced()
        if forced:  # put on a side by their median after the whole budget: the answer rests on a coin
            console.print(
                Text(
                    f"  uncertain: {len(forced)} probe(s) could not tell good from bad and were put by their "
                    f"median ({', '.join(p.sha[:12] for p in forced)}); a longer --max-time or more "
                    "--builds would decide them",
                    style="yellow",
                )
            )
        if answer.could_also_be:
            console.print(
                Text(
                    "  or one of the skipped commits before it: "
                    + ", ".join(f"{c.sha[:12]} {printable(c.subject)}" for c in answer.could_also_be),
                    style="yellow",
                )
            )
        if not args.no_why:
            _why(w, params, revs, good, answer.commit.sha, device, args, log, console)
    # A slowdown found is the documented exit 1 (bad is confirmed slower, whichever commit did it); a
    # speed-up found is good news (0), unless the commit named rests on probes that could not tell
    # (EXIT_UNDECIDED: a named commit is never an exit 0 on a coin, issue 49).
    if direction > 0:
        return 1
    return verdict.EXIT_UNDECIDED if state.forced() else 0


def _log_name(name: str, good: str, bad: str, change: str, params: dict | None = None) -> str:
    """The default log's file name: the workload's name made safe for a path (a name from a
    user's file never leaves .perfsuite/bisect/), the range, and the parameters' digest: a
    bisection of the same range with other `-p` has its own log (issue 50: it was refused as
    "another question" after 12 s of checking out)."""
    import hashlib
    import json
    import re

    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "workload"
    digest = hashlib.sha256(json.dumps(params or {}, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{safe}-{digest}-{good[:10]}-{bad[:10]}{'-faster' if change == 'faster' else ''}.bisect.json"


def _from(revs) -> str:

    if revs.mode == revisions.TREE:
        return f"the working tree ({revs.file_now})"
    return "each revision's own copy" if revs.mode == revisions.REVISION else f"revision {revs.mode}"


def _not_found(answer, args, change: str, console) -> int:
    """bad was not shown changed: undecided (exit 5), or shown not changed in that direction (0)."""
    conf = answer.confirmation
    if answer.state == UNDECIDED:
        console.print(
            Text(
                f"--bad {args.bad} against --good {args.good}: {_effect(conf)}; nothing bisected "
                f"(a longer --max-time gives the test more pairs)",
                style="yellow",
            )
        )
        return verdict.EXIT_UNDECIDED
    word = conf.word
    hint = ""
    if word in (verdict.FASTER, verdict.SLOWER) and word != change:
        hint = f"; it is {word}: `perfsuite bisect{' --faster' if word == 'faster' else ''}` finds that commit"
    console.print(
        Text(f"--bad {args.bad} is not {change} than --good {args.good}: {_effect(conf)}; nothing to bisect{hint}")
    )
    return 0


def _resume(state, log: Path, console) -> None:
    """Take the probes of a stored log of the same bisection; refuse a log of another one."""
    if not log.exists():
        return
    try:
        (old,) = load_document(log, "bisect")[:1]
    except (RecordError, ValueError) as exc:
        raise ConfigError(f"--log {log}: not a readable bisection log ({exc})") from None
    if not state.same_question(old):
        if old.settings.get("rule") != state.settings.get("rule"):
            raise ConfigError(
                f"--log {log}: written by an older perfsuite, whose probes were judged by another "
                "rule; remove it or give another --log"
            )
        differ = [
            k for k in sorted(set(old.settings) | set(state.settings)) if old.settings.get(k) != state.settings.get(k)
        ]
        what = f"settings differ: {', '.join(differ)}" if differ else "workload, parameters or revisions differ"
        raise ConfigError(f"--log {log}: the log of another bisection ({what}); remove it or give another --log")
    state.probes = old.probes
    console.print(Text(f"resuming from {log}: {len(old.probes)} probe(s) already done"))


def _save(state, log: Path, answer=None) -> None:
    d = state.to_dict()
    if answer is not None:
        d["answer"] = answer.to_dict()
    write_or_rescue(log, document("bisect", [d]), "--log")


def _logged(state, probe, log: Path, console) -> None:
    _save(state, log)
    c = next(c for c in state.commits if c.sha == probe.sha)
    if probe.outcome == "skipped":
        what = f"skipped ({printable((probe.error.splitlines() or [''])[0])})"
    elif probe.sha == state.bad.sha:  # the confirmation: the gate's own words
        what = f"--bad {_effect(probe)}"
    else:
        what = f"like {'bad' if probe.outcome == 'changed' else 'good'}; {_effect(probe, worded=False)}"
    console.print(
        Text(f"probe {len(state.probes)}: {c.sha[:12]} {printable(c.subject)}: {what} [{probe.seconds:.0f}s]")
    )
    if probe.sha != state.bad.sha:  # like good or like bad: say when the pairs could not tell
        for note in probe.verdict.notes if probe.verdict else []:
            if note.startswith("undecided"):
                console.print(Text(f"  {note}", style="yellow"))


def _effect(probe, worded: bool = True) -> str:
    """The probe's verdict with its ratio and interval (perfsuite.stats.verdict), over how many pairs.
    `worded=False`: the ratio and interval alone (a probe judged against halfway, whose word would
    be about halfway, not about good)."""
    if probe is None or probe.median_ratio is None:
        return "no pairs"
    gate = probe.gate
    if gate is None:
        return f"time ratio {probe.median_ratio:.3f} over {len(probe.ratios)} pairs"
    text = gate.describe()
    if not worded:
        text = text.split(", ", 1)[1].split(": ")[0]  # "ratio 1.050 (98% CI ...)"
    return f"{text} over {len(probe.ratios)} pairs"


def _why(w, params, revs, good, named, device, args, log: Path, console) -> None:
    """The differential profile of good against the named commit, printed and stored beside the log."""
    try:
        result = why_commits(
            w,
            params,
            revs,
            good,
            named,
            device,
            threads=args.threads,
            steps=args.steps,
            rounds=args.rounds,
            top=args.top,
        )
    except PerfsuiteError as exc:  # the commit is named and logged already: its exit status stands
        console.print(Text(f"why could not profile the two sides: {exc}", style="yellow"))
        return
    print_why(result, console)
    out = log.with_name(log.name.removesuffix(".json").removesuffix(".bisect") + ".why.json")
    write_or_rescue(out, document("why", [result.to_dict()]), "why beside the --log")
    if args.recorder is not None:
        args.recorder.add_document("why", result.to_dict(), workload=w.name)
    console.print(Text(f"why written to {out}"))
