"""`bisect`: the first first-parent commit between a good and a bad revision that made a workload
slower (or faster), from probes in rounds of fresh side processes, resumed from its log, with the
differential profile of the commit it names. `perfsuite bisect` and perfsuite.bisect are this call."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from perfsuite.compare import bisection as b
from perfsuite.compare import revisions, sides
from perfsuite.compare.bisect_probe import MAX_BUDGETS, Prober, first_parent_commits, subject
from perfsuite.compare.settings import GateSettings, WhyOptions
from perfsuite.compare.why import WhyResult
from perfsuite.compare.why_sides import why_commits
from perfsuite.core.case import Case
from perfsuite.core.discover import workload_named
from perfsuite.core.errors import ConfigError, PerfsuiteError, RecordError
from perfsuite.core.text import printable
from perfsuite.jobs.listener import ALARM, GOOD, WARNING, Listener
from perfsuite.run.execute import check_cases
from perfsuite.stats import verdict
from perfsuite.storage.files import document, load_document
from perfsuite.storage.folder import Reserved
from perfsuite.storage.write import write_or_rescue

BISECT_DIR = Path(".perfsuite") / "bisect"


@dataclass
class BisectRun:
    """What one call found: the probes (`state`), the `answer` (perfsuite.compare.bisection.Answer:
    found, undecided or not changed, the commit named, the skipped ones), the log, and the
    profile of the commit named (`why`, written to `why_file`) when one was named and profiled."""

    state: b.Bisection
    answer: b.Answer
    log: Path
    direction: int
    why: WhyResult | None = None
    why_file: Path | None = None


def bisect(
    workload: str,
    good: str,
    bad: str,
    *,
    params: dict | None = None,
    device: str = "auto",
    settings: GateSettings | None = None,
    faster: bool = False,
    log: Path | None = None,
    why: WhyOptions | None = None,
    workloads_from: str = revisions.TREE,
    recorder=None,
    listener: Listener | None = None,
) -> BisectRun:
    """Bisect the first-parent commits after `good` up to `bad` of the repository `workload` is
    declared in: `bad` is confirmed slower than good first (`faster`: faster), then each probe
    tells like good from like bad (settings: the gate's, threads one on the CPU by default). The
    log is saved after each probe and resumed by the next call; `why` profiles the commit named."""
    from perfsuite.core.config import resolve_device

    say = listener or Listener()
    w = workload_named(workload)
    params = w.resolve(params or {})
    device = resolve_device(device)
    settings = (settings or GateSettings()).on(device)
    # Energy only when asked: every probe would pay its ~12 s (GateSettings.energy).
    settings = replace(settings, energy=bool(settings.energy))
    check_cases([Case(w, params)], device).runnable()
    direction, change = (-1, "faster") if faster else (1, "slower")
    with revisions.Revisions(w, workloads_from) as revs:
        good_sha = revisions.resolve_commit(good, revs.repo, "--good")
        bad_sha = revisions.resolve_commit(bad, revs.repo, "--bad")
        commits = first_parent_commits(revs.repo, good_sha, bad_sha)
        for flag, rev, sha in (("--good", good, good_sha), ("--bad", bad, bad_sha)):
            missing = revs.missing_at(sha)
            if missing:
                raise ConfigError(f"{flag} {rev}: {missing}")
        logged = {
            **settings.logged(),
            "rule": b.PROBE_RULE,
            "direction": change,
            "workloads_from": revs.mode
            if revs.mode in (revisions.TREE, revisions.REVISION)
            else revisions.resolve_commit(revs.mode, revs.repo),
        }
        state = b.Bisection(w.name, params, device, b.Commit(good_sha, subject(revs.repo, good_sha)), commits, logged)
        log = log or BISECT_DIR / log_name(w.name, good_sha, bad_sha, change, params)
        # Before any probe (and before resuming from it): a measured probe is never lost to its log.
        log_out = Reserved(log, "--log", replace=True)
        resume(state, log, say)
        probes = math.ceil(math.log2(len(commits)))  # bad is known changed once confirmed: halve the rest
        say.say(
            f"bisecting {len(commits)} first-parent commit(s) of {revs.repo} after {good_sha[:12]} up to "
            f"{bad_sha[:12]} for the first {change} one: confirming --bad, then about {probes} probe(s), "
            f"{settings.max_time:g}-{MAX_BUDGETS * settings.max_time:g}s each plus start-up; workload file from "
            f"{_from(revs)}; log {log}"
        )
        with (
            sides.placed(device, settings.threads),
            Prober(w, params, revs, good_sha, device, settings, direction=direction, progress=say.progress) as prober,
        ):
            answer = b.run_bisection(state, prober, lambda s, p: _logged(s, p, log_out, say))
        _save(state, log_out, answer)
        if recorder is not None:  # the finished bisection, with its answer, in the store's history
            recorder.add_document("bisect", {**state.to_dict(), "answer": answer.to_dict()}, workload=w.name)
        run = BisectRun(state, answer, log, direction)
        said(run, good, bad, say)  # before the profile: Ctrl-C during it keeps the answer on screen
        if answer.state == b.FOUND and answer.commit is not None and why is not None:
            _profile(run, w, params, revs, good_sha, device, settings, why, recorder, say)
    return run


def said(run: BisectRun, good: str, bad: str, say: Listener) -> None:
    """The answer in words: the commits skipped, the commit named (or why none is), and how sure."""
    answer, change = run.answer, "faster" if run.direction < 0 else "slower"
    for c in answer.skipped:
        first = c.error.splitlines()[0] if c.error else ""
        say.say(printable(f"skipped {c.sha[:12]} {c.subject}: {first}"), WARNING)
    if answer.state == b.UNDECIDED:
        say.say(
            f"--bad {bad} against --good {good}: {effect(answer.confirmation)}; nothing bisected "
            "(a longer --max-time gives the test more pairs)",
            WARNING,
        )
        return
    if answer.state != b.FOUND or answer.commit is None:
        conf = answer.confirmation
        word = conf.word if conf is not None else None
        hint = ""
        if word in (verdict.FASTER, verdict.SLOWER) and word != change:
            hint = f"; it is {word}: `perfsuite bisect{' --faster' if word == 'faster' else ''}` finds that commit"
        say.say(f"--bad {bad} is not {change} than --good {good}: {effect(conf)}; nothing to bisect{hint}")
        return
    named = f"first {change} commit: {answer.commit.sha[:12]} {printable(answer.commit.subject)}"
    say.say(named, ALARM if run.direction > 0 else GOOD)
    say.say(f"  against --good: {effect(answer.probe)}")
    forced = run.state.forced()
    if forced:  # put on a side by their median after the whole budget: the answer rests on a coin
        say.say(
            f"  uncertain: {len(forced)} probe(s) could not tell good from bad and were put by their "
            f"median ({', '.join(p.sha[:12] for p in forced)}); a longer --max-time or more --builds would decide them",
            WARNING,
        )
    if answer.could_also_be:
        say.say(
            "  or one of the skipped commits before it: "
            + ", ".join(f"{c.sha[:12]} {printable(c.subject)}" for c in answer.could_also_be),
            WARNING,
        )


def log_name(name: str, good: str, bad: str, change: str, params: dict | None = None) -> str:
    """The default log's file name: the workload's name made safe for a path (a name from a
    user's file never leaves .perfsuite/bisect/), the range, and the parameters' digest: a
    bisection of the same range with other `-p` has its own log (issue 50: it was refused as
    "another question" after 12 s of checking out)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "workload"
    digest = hashlib.sha256(json.dumps(params or {}, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{safe}-{digest}-{good[:10]}-{bad[:10]}{'-faster' if change == 'faster' else ''}.bisect.json"


def _from(revs) -> str:
    if revs.mode == revisions.TREE:
        return f"the working tree ({revs.file_now})"
    return "each revision's own copy" if revs.mode == revisions.REVISION else f"revision {revs.mode}"


def resume(state: b.Bisection, log: Path, say: Listener) -> None:
    """Take the probes of a stored log of the same bisection; refuse a log of another one."""
    if not log.exists():
        return
    try:
        (old,) = load_document(log, "bisect", b.Bisection)[:1]
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
    say.say(f"resuming from {log}: {len(old.probes)} probe(s) already done")


def _save(state: b.Bisection, log: Reserved, answer: b.Answer | None = None) -> None:
    d = state.to_dict()
    if answer is not None:
        d["answer"] = answer.to_dict()
    log.write(document("bisect", [d]))


def _logged(state: b.Bisection, probe: b.Probe, log: Reserved, say: Listener) -> None:
    _save(state, log)
    c = next(c for c in state.commits if c.sha == probe.sha)
    if probe.outcome == "skipped":
        what = f"skipped ({printable((probe.error.splitlines() or [''])[0])})"
    elif probe.sha == state.bad.sha:  # the confirmation: the gate's own words
        what = f"--bad {effect(probe)}"
    else:
        what = f"like {'bad' if probe.outcome == 'changed' else 'good'}; {effect(probe, worded=False)}"
    say.say(f"probe {len(state.probes)}: {c.sha[:12]} {printable(c.subject)}: {what} [{probe.seconds:.0f}s]")
    if probe.sha != state.bad.sha:  # like good or like bad: say when the pairs could not tell
        for note in probe.verdict.notes if probe.verdict else []:
            if note.startswith("undecided"):
                say.say(f"  {note}", WARNING)


def effect(probe: b.Probe | None, worded: bool = True) -> str:
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


def _profile(run: BisectRun, w, params, revs, good: str, device, settings, why: WhyOptions, recorder, say) -> None:
    """The differential profile of good against the named commit, kept beside the log."""
    assert run.answer.commit is not None  # found
    try:
        result = why_commits(w, params, revs, good, run.answer.commit.sha, device, threads=settings.threads,
                             steps=why.steps, rounds=why.rounds, top=why.top, variant=settings.variant)  # fmt: skip
    except PerfsuiteError as exc:  # the commit is named and logged already: its outcome stands
        say.say(f"why could not profile the two sides: {exc}", WARNING)
        return
    out = run.log.with_name(run.log.name.removesuffix(".json").removesuffix(".bisect") + ".why.json")
    write_or_rescue(
        out, document("why", [result.to_dict()]), "why beside the --log"
    )  # its folder is the log's, checked
    if recorder is not None:
        recorder.add_document("why", result.to_dict(), workload=w.name)
    run.why, run.why_file = result, out
