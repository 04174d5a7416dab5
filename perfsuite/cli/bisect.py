"""`perfsuite bisect`: the first commit between --good and --bad that made a workload slower, then why."""

from __future__ import annotations

import math
from pathlib import Path

from rich.text import Text

from perfsuite.core.text import printable

from perfsuite.core.errors import ConfigError, PerfsuiteError


def bisect_command(args, console) -> int:
    from perfsuite.compare import bisect as b
    from perfsuite.compare import sides
    from perfsuite.compare.bisect_probe import MAX_BUDGETS, Prober, exists_at, first_parent_commits, subject
    from perfsuite.core import registry
    from perfsuite.core.config import RunConfig, resolve_device
    from perfsuite.core.params import single_values

    if args.threshold < 0:
        raise ConfigError(f"--threshold must be >= 0, got {args.threshold}")
    w = registry.get(args.workload)
    params = w.resolve(single_values(args.param, w))
    device = resolve_device(args.device)
    args.threads = RunConfig(threads=args.threads).threads_on(device)  # 1 on the CPU, as the gate
    w.check(params, device)
    file_now = sides.workload_file(w.source, w.name)
    repo = sides.git_root(file_now.parent)
    try:
        rel = file_now.resolve().relative_to(repo.resolve())
    except ValueError:
        raise ConfigError(f"{file_now} is not inside the repository {repo}: bisect walks that repository's "
                          "history") from None
    good = sides.resolve_commit(args.good, repo, "--good")
    bad = sides.resolve_commit(args.bad, repo, "--bad")
    commits = first_parent_commits(repo, good, bad)
    for flag, rev, sha in (("--good", args.good, good), ("--bad", args.bad, bad)):
        if not exists_at(repo, sha, rel):
            raise ConfigError(f"{flag} {rev}: {rel} (workload {w.name!r}) does not exist at that revision")
    settings = {"max_time": args.budget, "builds": args.builds, "threshold": args.threshold, "fdr": args.fdr,
                "threads": args.threads, "heap": args.heap, "rule": b.PROBE_RULE}
    state = b.Bisection(w.name, params, device, b.Commit(good, subject(repo, good)), commits, settings)
    log = args.log or Path(".perfsuite") / "bisect" / f"{w.name}-{good[:10]}-{bad[:10]}.bisect.json"
    _resume(state, log, console)

    probes = math.ceil(math.log2(len(commits)))  # bad is known slower once confirmed: halve the rest
    console.print(Text(f"bisecting {len(commits)} first-parent commit(s) of {repo} after {good[:12]} up to "
                       f"{bad[:12]}: confirming --bad, then about {probes} probe(s), {args.budget:g}-{MAX_BUDGETS * args.budget:g}s each plus "
                       f"start-up; log {log}"))
    with Prober(w, params, repo, rel, good, device, budget_s=args.budget, builds=args.builds,
                threshold=args.threshold, threads=args.threads, heap=args.heap, fdr=args.fdr) as prober:
        answer = b.run_bisection(state, prober, lambda s, p: _logged(s, p, log, console))
    _save(state, log, answer)
    for c, error in answer.skipped:
        console.print(Text(f"skipped {c.sha[:12]} {printable(c.subject)}: {error.splitlines()[0] if error else ''}",
                           style="yellow"))
    if answer.state == b.NOT_SLOWER:
        console.print(Text(f"--bad {args.bad} is not slower than --good {args.good}: "
                           f"{_effect(answer.confirmation)}; nothing to bisect"))
        return 0
    console.print(Text(f"first slower commit: {answer.commit.sha[:12]} {printable(answer.commit.subject)}", style="bold red"))
    console.print(Text(f"  against --good: {_effect(answer.probe)}"))
    if answer.could_also_be:
        console.print(Text("  or one of the skipped commits before it: "
                           + ", ".join(f"{c.sha[:12]} {printable(c.subject)}" for c in answer.could_also_be), style="yellow"))
    if not args.no_why:
        _why(w, params, repo, rel, good, answer.commit.sha, device, args, log, console)
    return 1


def _resume(state, log: Path, console) -> None:
    """Take the probes of a stored log of the same bisection; refuse a log of another one."""
    from perfsuite.compare.bisect import Bisection
    from perfsuite.storage.files import load_document, writable_dir

    if not log.exists():
        writable_dir(log.parent, "--log folder")
        return
    (stored,) = load_document(log, "bisect")[:1] or [None]
    try:
        old = Bisection.from_dict(stored)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"--log {log}: not a readable bisection log ({exc})") from None
    if not state.same_question(old):
        if old.settings.get("rule") != state.settings.get("rule"):
            raise ConfigError(f"--log {log}: written by an older perfsuite, whose probes were judged by another "
                              "rule; remove it or give another --log")
        differ = [k for k in sorted(set(old.settings) | set(state.settings))
                  if old.settings.get(k) != state.settings.get(k)]
        what = f"settings differ: {', '.join(differ)}" if differ else "workload, parameters or revisions differ"
        raise ConfigError(f"--log {log}: the log of another bisection ({what}); remove it or give another --log")
    state.probes = old.probes
    console.print(Text(f"resuming from {log}: {len(old.probes)} probe(s) already done"))


def _save(state, log: Path, answer=None) -> None:
    from perfsuite.storage.files import atomic_write_text, document

    d = state.to_dict()
    if answer is not None:
        d["answer"] = answer.to_dict()
    atomic_write_text(log, document("bisect", [d]))


def _logged(state, probe, log: Path, console) -> None:
    _save(state, log)
    c = next(c for c in state.commits if c.sha == probe.sha)
    what = probe.outcome if probe.outcome != "skipped" else f"skipped ({(probe.error.splitlines() or [''])[0]})"
    console.print(Text(f"probe {len(state.probes)}: {c.sha[:12]} {printable(c.subject)}: {what}"
                       + (f", {_effect(probe)}" if probe.verdict else "") + f" [{probe.seconds:.0f}s]"))
    threshold = (probe.verdict or {}).get("threshold", 0.0)
    if probe.sha != state.bad.sha:  # like good or like bad: say when the pairs could not tell
        for note in (probe.verdict or {}).get("notes", []):
            if note.startswith("undecided"):
                console.print(Text(f"  {note}", style="yellow"))
    elif probe.outcome == "same" and probe.median_ratio is not None and probe.median_ratio > 1 + threshold:
        # The gate's test could not tell with so few pairs: nothing is bisected.
        console.print(Text(f"  undecided rather than the same: the median is above the threshold "
                           f"(+{threshold:.0%}) but {len(probe.ratios)} pairs could not show it; a longer "
                           "--max-time gives the test more pairs", style="yellow"))


def _effect(probe) -> str:
    if probe is None or probe.median_ratio is None:
        return "no pairs"
    ci = probe.ratio_ci
    ci_txt = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
    return f"time ratio {probe.median_ratio:.3f}{ci_txt} over {len(probe.ratios)} pairs"


def _why(w, params, repo, rel, good, named, device, args, log: Path, console) -> None:
    """The differential profile of good against the named commit, printed and stored beside the log."""
    from perfsuite.cli.why import print_why
    from perfsuite.compare.why_sides import why_commits
    from perfsuite.storage.files import atomic_write_text, document

    try:
        result = why_commits(w, params, repo, rel, good, named, device, threads=args.threads, steps=args.steps,
                             rounds=args.rounds, top=args.top)
    except PerfsuiteError as exc:  # the commit is named and logged already: its exit status stands
        console.print(Text(f"why could not profile the two sides: {exc}", style="yellow"))
        return
    print_why(result, console)
    out = log.with_name(log.name.removesuffix(".json").removesuffix(".bisect") + ".why.json")
    atomic_write_text(out, document("why", [result.to_dict()]))
    console.print(Text(f"why written to {out}"))
