"""`history`: every first-parent commit of a range measured against the one before it, then what
the points say (confirmed regressions with their operators, improvements, slow drifts), its log
and its page. The command line's `perfsuite history` and perfsuite.history are this call."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfsuite.compare import revisions, sides
from perfsuite.compare.history_walk import PairProber, dirty, range_commits, walk
from perfsuite.compare.paired_history import (
    HISTORY_RULE,
    MEASURED,
    RECHECK_BUDGET,
    SCREEN_ALPHA,
    History,
    Point,
    Window,
)
from perfsuite.compare.settings import GateSettings, WhyOptions
from perfsuite.core import documents
from perfsuite.core.case import Case
from perfsuite.core.discover import workload_named
from perfsuite.core.errors import ConfigError
from perfsuite.core.text import printable
from perfsuite.jobs import history_log as logs
from perfsuite.jobs import history_steps as steps
from perfsuite.jobs.listener import ALARM, WARNING, Listener
from perfsuite.measuring.fingerprint import comparable, fingerprint
from perfsuite.report.history_page import write_page
from perfsuite.run.execute import check_cases
from perfsuite.storage.files import load_document
from perfsuite.storage.folder import Reserved

DEFAULT_FLOORS = Path(".perfsuite") / "noise-floors.json"


@dataclass
class HistoryRun:
    """What one call measured: the whole history (`state`, this run's points and earlier ones), the
    commits measured now (`fresh`), where its log and page are, and `alarm`: a regression confirmed
    since the last run's outcome was given (or the newest commit carries one), which fails CI."""

    state: History
    log: Path
    page: Path
    repo: Path
    fresh: set[str] = field(default_factory=set)
    alarm: bool = False


def history(
    workload: str,
    range: str | None = None,
    *,
    update: bool = False,
    params: dict | None = None,
    device: str = "auto",
    settings: GateSettings | None = None,
    every: int = 1,
    max_commits: int = 100,
    log: Path | None = None,
    html: Path | None = None,
    floors: Path = DEFAULT_FLOORS,
    why: WhyOptions | None = None,
    allow_dirty: bool = False,
    workloads_from: str = revisions.TREE,
    recorder=None,
    listener: Listener | None = None,
) -> HistoryRun:
    """Measure the commits after A up to B of `range` ("A..B"; with `update`, the stored history's
    start up to HEAD or B) of the repository `workload` is declared in, each against the one
    before it, in rounds of fresh side processes (`settings`; threads default to one on the CPU).
    A changed point is rechecked, a change spanning several commits (`every` > 1, a slow drift)
    bisected inside, and each confirmed change profiled (`why`; None: not profiled). The log is
    saved after each point and resumed by the next call; the page is written at the end."""
    from perfsuite.core.config import resolve_device

    say = listener or Listener()
    w = workload_named(workload)
    params = w.resolve(params or {})
    device = resolve_device(device)
    settings = (settings or GateSettings(max_time=10.0)).on(device)
    # Energy only when asked: every point, recheck and probe would pay its ~12 s (GateSettings.energy).
    settings = replace(settings, energy=bool(settings.energy))
    if range is None and not update:
        raise ConfigError("give --range A..B, or --update to extend a stored history up to HEAD")
    check_cases([Case(w, params)], device).runnable()
    with revisions.Revisions(w, workloads_from) as revs, contextlib.ExitStack() as held:
        changed = dirty(revs.repo)
        if changed and not allow_dirty:
            raise ConfigError(
                f"{revs.repo} has uncommitted changes ({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}): "
                "a history is of commits; commit or stash them, or give --allow-dirty"
            )
        case_floors = load_document(floors, "noise-floors") if floors.exists() else {}
        floor = case_floors.get(Case(w, params).label)
        logged = {
            "floor": floor,  # what the points are judged beyond: a relearned floor is another question
            **settings.logged(),
            "rule": HISTORY_RULE,
            "every": every,
            "workloads_from": revs.mode
            if revs.mode in (revisions.TREE, revisions.REVISION)
            else revisions.resolve_commit(revs.mode, revs.repo, "--workloads-from"),
        }
        log = log or logs.HISTORY_DIR / logs.log_name(w.name, params)
        log_out = Reserved(log, "--log", replace=True)  # before any pair: a measured point is never lost to its log
        held.callback(os.close, logs.hold(log))  # before reading it: one run at a time writes a log
        page = html or logs.page_beside(log)
        if page.resolve() == log.resolve():
            raise ConfigError(f"--html {page}: the same file as the history's log; the page would replace it")
        page_out = Reserved(page, "--html", replace=True)
        state, plan = _planned(w, params, device, revs, range, update, log, logged, max_commits, settings)
        say.say(printable(f"{plan}; log {log}" + (f"; noise floor {floor:.2%} from {floors}" if floor else "")))
        env = comparable(fingerprint(device=device))
        with (
            sides.placed(device, settings.threads),
            PairProber(w, params, revs, device, settings, floors=case_floors, progress=say.progress,
                       screen_alpha=SCREEN_ALPHA) as prober,
        ):  # fmt: skip
            new = walk(
                state,
                prober.pair,
                env,
                lambda s, p: _logged(s, p, log_out, say),
                prober.keep_only,
                steps.bisector(w, params, revs, device, settings, floor, say),
                lambda a, b: steps.rechecked(prober, a, b, settings.max_time * RECHECK_BUDGET, say),
            )
        state.confirm()
        fresh = {p.sha for p in new if p.outcome == MEASURED}
        if why is not None:
            # this run's confirmed changes and drifts, and any a resumed run left unprofiled
            changes: list[Point | Window] = [*state.regressions(), *state.improvements(), *state.drifts()]
            for x in changes:
                if x.why is None:
                    x.why = steps.profiled(w, params, revs, *steps.profiled_ends(x, state), device, settings, why, say)
                    logs.save(state, log_out)  # each profile as it ends: Ctrl-C during the next keeps it
        logs.save(state, log_out)
        page_out.write(write_page(state))
        if recorder is not None:  # one store for every road
            recorder.add_document("history", state.to_dict(), workload=w.name)
    alarm = state.report(fresh)
    logs.save(state, log_out)  # with `reported`: a later run's outcome is about what comes after this one
    return HistoryRun(state, log, page, revs.repo, fresh, alarm)


def _planned(w, params, device, revs, given_range, update, log, logged, max_commits, settings) -> tuple[History, str]:
    """The history to walk (the stored one extended by the range's new commits, or a new one) and
    a line saying what it will measure;
    refused when it would measure more than `max_commits` commits (issue 50: `--update` once
    planned 874 commits, five hours, unsaid)."""
    kept = logs.stored(log)
    start_rev, end_rev = logs.range_ends(given_range, kept)
    start = revisions.resolve_commit(start_rev, revs.repo, "--range")
    if kept is not None and update and start != kept.base.sha:
        raise ConfigError(
            f"--update --range {given_range}: the stored history starts at {kept.base.sha[:12]}, "
            f"not at {start[:12]}; give no --range, or --range {kept.base.sha[:12]}..REV"
        )
    end = revisions.resolve_commit(end_rev, revs.repo, "--range")
    if start == end:
        raise ConfigError(f"--range {start_rev}..{end_rev}: the same commit, no commit after it to measure")
    base, commits = range_commits(revs.repo, start, end)
    if len(commits) > documents.MAX_GROUPS:  # pydantic's own words said it before (issue 51)
        raise ConfigError(
            f"{len(commits)} commits after {base.sha[:12]} up to {end[:12]}, more "
            f"than the {documents.MAX_GROUPS} one history log holds: give a shorter --range (the last "
            f"{documents.MAX_GROUPS}: --range {end[:12]}~{documents.MAX_GROUPS}..{end[:12]}), or one log per stretch"
        )
    missing = revs.missing_at(base.sha)
    if missing:  # the range's start is every later pair's first base
        raise ConfigError(f"--range: its start {base.sha[:12]}: {missing}")
    state = History(w.name, params, device, base, commits, logged)
    if kept is not None:
        if not state.same_question(kept):
            differ = [k for k in sorted(set(kept.settings) | set(logged)) if kept.settings.get(k) != logged.get(k)]
            what = f"settings differ: {', '.join(differ)}" if differ else "workload, parameters, device or start differ"
            raise ConfigError(f"--log {log}: the history of another question ({what}); remove it or give another --log")
        state = kept.extended(commits)
    pending = state.pending()
    cost_s = len(pending) * steps.pair_cost_s(state, settings.max_time)
    if len(pending) > max_commits:
        raise ConfigError(
            f"{len(pending)} commits to measure after {base.sha[:12]} up to {end[:12]}, about "
            f"{steps.duration(cost_s)}: more than --max-commits {max_commits}. Give --max-commits "
            f"{len(pending)} to measure them all, --every K to measure every K-th (a confirmed change "
            "is bisected inside its span), or a shorter --range"
        )
    return state, (
        f"history of {w.name} {_params(params)} on {device}: {len(commits)} commit(s) after "
        f"{base.sha[:12]} up to {end[:12]}, {len(pending)} to measure, each against the one before, "
        f"about {steps.duration(cost_s)} (rechecks of changes come on top)"
    )


def _params(params: dict) -> str:
    return "[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"


def _logged(state: History, p: Point | Window, log: Reserved, say: Listener) -> None:
    """After each point and window: the log saved, and a line saying what it was."""
    logs.save(state, log)
    if isinstance(p, Window):
        said = f"rechecked: {p.recheck.describe()}" if p.recheck else f"gated end against start: {p.screen_said()}"
        if p.bisection:  # a bisection inside the confirmed drift has ended
            said += f"; {printable(p.bisection)}"
        say.say(f"slow drift {p.start[:12]}..{p.end[:12]} {said}", ALARM if p.verdict.confirmed else "info")
        return
    subject = printable(state.subject_of(p.sha))
    if p.bisection:  # a bisection inside the point has ended
        say.say(f"{p.parent[:12]}..{p.sha[:12]}: {printable(p.bisection)}")
    elif p.recheck is not None:  # stage 2 has ended
        say.say(f"{p.sha[:12]} {subject}: rechecked: {p.recheck.describe()} against {p.parent[:12]}")
    elif p.outcome != MEASURED or p.verdict is None:
        first = printable((p.error.splitlines() or [""])[0])
        if len(first) > 300:  # the end of an error says what went wrong; its start, where
            first = "..." + first[-300:]
        say.say(f"{p.sha[:12]} {subject}: skipped ({first})", WARNING)
    else:
        say.say(f"{p.sha[:12]} {subject}: {p.screen_said()} against {p.parent[:12]} [{p.seconds:.0f}s]")
