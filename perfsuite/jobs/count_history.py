"""`history --instructions`: every commit of a range counted once (perfsuite.measuring.instructions:
the CPU's hardware counter, or Callgrind), each against
the last counted commit before it (perfsuite.compare.count_walk), kept in a log beside the time
histories' and drawn on a page. A later call (`update`: the stored start up to HEAD) reuses the
kept counts of the same machine and counts only the commits that came since. `perfsuite history
--instructions` and perfsuite.jobs.count_history.count_history are this call. Each commit a call
counts and flags is then gated by time against its parent (`by_time`), its verdict kept in the log
beside its count."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfsuite.compare import revisions
from perfsuite.compare.count_walk import CountHistory, CountPoint, walk_by_count
from perfsuite.compare.history_walk import range_commits
from perfsuite.compare.settings import GateSettings
from perfsuite.compare.work import INSTRUCTION_THRESHOLD
from perfsuite.core.case import Case
from perfsuite.core.discover import workload_named
from perfsuite.core.errors import ConfigError, PerfsuiteError
from perfsuite.jobs import history_log as logs
from perfsuite.jobs.count_bisect import commit_counter
from perfsuite.jobs.listener import Listener
from perfsuite.measuring import instructions
from perfsuite.measuring.fingerprint import comparable, fingerprint
from perfsuite.report.count_page import write_count_page
from perfsuite.run.execute import check_cases
from perfsuite.storage.files import document
from perfsuite.storage.folder import Reserved


@dataclass
class CountRun:
    """What one call walked (`state`), the commits it counted now (`fresh`; the others' counts were
    kept from an earlier call), and where its log and page are."""

    state: CountHistory
    log: Path
    page: Path
    fresh: set[str] = field(default_factory=set)


def count_log(name: str, params: dict) -> Path:
    """The default log of a case's history by count: beside its time history, never the same file."""
    return logs.HISTORY_DIR / logs.log_name(name, params).replace(".history.json", ".instructions.json")


def _stored(log: Path, workload: str, params: dict) -> CountHistory | None:
    old = logs.kept(log, "count-history", CountHistory, "history by count")
    if old is None:
        return None
    if old.workload != workload or old.params != params:
        raise ConfigError(
            f"--log {log}: the count history of {old.workload} {old.params}, not of {workload} {params}; "
            "it is left as it is: give another --log"
        )
    return old


def count_history(
    workload: str,
    range_: str | None = None,
    *,
    update: bool = False,
    params: dict | None = None,
    device: str = "auto",
    threshold: float = INSTRUCTION_THRESHOLD,
    every: int = 1,
    max_commits: int = 100,
    log: Path | None = None,
    html: Path | None = None,
    workloads_from: str = revisions.TREE,
    listener: Listener | None = None,
    by_time: GateSettings | None = None,
) -> CountRun:
    """Count A and every `every`-th commit after it up to B (B always) of `range_` ("A..B"; with
    `update`, the stored history's start up to HEAD), each in its own checkout, a count kept in the
    log reused. Refused before any count when the instructions cannot be counted here, or when the
    plan is longer than `max_commits`. With `by_time`, each commit counted now whose move was
    flagged is then gated by time against its parent with those settings (the counting server
    gone by then). The log is saved after each commit and each gate, the page at the end."""
    from perfsuite.core.config import resolve_device

    say = listener or Listener()
    w = workload_named(workload)
    params = w.resolve(params or {})
    device = resolve_device(device)
    if range_ is None and not update:
        raise ConfigError("give --range A..B, or --update to extend a stored history by count up to HEAD")
    check_cases([Case(w, params)], device).runnable()
    why = instructions.unavailable(device)
    if why is not None:
        raise ConfigError(f"--instructions: {why}")
    log = log or count_log(w.name, params)
    page = html or logs.page_beside(log)
    if page.resolve() == log.resolve():
        raise ConfigError(f"--html {page}: the same file as the history's log; the page would replace it")
    log_out, page_out = Reserved(log, "--log", replace=True), Reserved(page, "--html", replace=True)
    lock = logs.hold(log)
    try:
        old = _stored(log, w.name, params)
        if range_ is None and (old is None or not old.points):
            raise ConfigError(f"--update: no history by count in {log} to extend; start one with --range A..B")
        if range_ is not None and update:
            raise ConfigError("--update extends the log from its start up to HEAD: give --range or --update, not both")
        with revisions.Revisions(w, workloads_from) as revs:
            if old is not None and (old.every, old.workloads_from) != (every, revs.mode):
                raise ConfigError(
                    f"--log {log}: walked with --every {old.every} and workloads from {old.workloads_from!r}, not "
                    f"--every {every} and {revs.mode!r}: its counts would not be of the same commits and files; "
                    "it is left as it is: give the same options or another --log"
                )
            a, b = logs.range_ends(range_, None) if range_ is not None else (old.points[0].sha, "HEAD")  # type: ignore[union-attr]
            start, end = (
                revisions.resolve_commit(a, revs.repo, "--range"),
                revisions.resolve_commit(b, revs.repo, "--range"),
            )
            if old is not None and old.points and start != old.points[0].sha:
                raise ConfigError(
                    f"--log {log}: it starts at {old.points[0].sha[:12]}, not {start[:12]}: it is left as it is; "
                    "extend it with --update, or give another --log for another range"
                )
            if start == end:
                raise ConfigError(f"--range {a}..{b}: the same commit, no commit after it to count")
            base, after = range_commits(revs.repo, start, end)
            kept = {p.sha: p for p in old.points} if old else {}
            # Every Nth commit, B always, and every commit the log already holds (a B of before).
            chosen = [c for i, c in enumerate(after, 1) if i % every == 0 or c is after[-1] or c.sha in kept]
            walked = {base.sha, *(c.sha for c in chosen)}
            dropped = [p.sha[:12] for p in (old.points if old else []) if p.sha not in walked]
            if dropped:
                raise ConfigError(
                    f"--log {log}: it holds commits this walk would drop ({', '.join(dropped[:5])}): it is left as "
                    "it is; extend it with --update, or give another --log"
                )
            machine = _machine(device)
            new = [c for c in [base, *chosen] if not _reusable(kept.get(c.sha), machine)]
            if len(new) > max_commits:
                raise ConfigError(
                    f"--range {a}..{b}: {len(new)} commits to count (about {1 + len(new) * 10 / 60:.0f} min "
                    "for a small step, more for a large one), more than --max-commits {max_commits}: raise it, or count every Nth (--every)"
                )
            say.say(
                f"{workload}: counting instructions per step at {len(new)} commit(s), "
                f"{len(chosen) + 1 - len(new)} kept from {log}, {instructions.described()}"
            )
            state = CountHistory(w.name, params, device, threshold, every, revs.mode, counter=instructions.method())
            with instructions.Counter() as counter:
                count_at, heard = commit_counter(revs, w, params, device, say, counter)
                walk_by_count(
                    state, [base, *chosen], count_at, machine, kept=kept, heard=heard,
                    saved=lambda s: log_out.write(document("count-history", [s.to_dict()])),
                )  # fmt: skip
            page_out.write(write_count_page(state))  # the counts' page before any gate: a Ctrl-C keeps it
            if by_time is not None:
                _gate_by_time(state, {c.sha for c in new}, revs.repo, by_time, params, device, workloads_from, say,
                              lambda: _saved(state, log_out, page_out))  # fmt: skip
        page_out.write(write_count_page(state))
        return CountRun(state, log, page, {c.sha for c in new})
    finally:
        os.close(lock)


def _saved(state: CountHistory, log_out: Reserved, page_out: Reserved) -> None:
    """The log and its page, as the walk stands now."""
    log_out.write(document("count-history", [state.to_dict()]))
    page_out.write(write_count_page(state))


def _gate_by_time(state: CountHistory, fresh: set[str], repo: Path, settings: GateSettings, params: dict,
                  device: str, workloads_from: str, say: Listener, saved: Callable[[], object]) -> None:  # fmt: skip
    """Each commit of `fresh` whose count moved past the threshold, gated by time against its first
    parent (the gate's road: `perfsuite gate --commit`), its verdict or why there is none put on its
    point, the log `saved` after each. The count's move is the finding, and time confirms it where
    time can see it (issue 56: on pytorch-cifar, +56.6% instructions was 1.77x the time; a +1%
    Python loop reads "undecided" by time on this VM). A point counted against an earlier commit
    than its parent (--every, a commit that could not be counted) is not gated."""
    from perfsuite.jobs.gate import gate

    points = [p for p in state.points if p.per_step is not None]
    before = {p.sha: q.sha for q, p in zip(points, points[1:])}
    flagged = {p.sha for p in state.changed(1) + state.changed(-1)} & fresh
    for i, p in enumerate(state.points):
        if p.sha not in flagged:
            continue
        try:
            parent = revisions.resolve_commit(f"{p.sha}^", repo)
        except PerfsuiteError:
            parent = None
        if parent != before.get(p.sha):
            note = f"not gated (its count was compared with {before.get(p.sha, '?')[:12]}, not its parent)"
            state.points[i] = replace(p, by_time_note=note)
            saved()
            continue
        say.progress(f"{p.sha[:12]}: gating by time against its parent")
        try:
            gated = gate(state.workload, commit=p.sha, cases=[params], device=device, settings=settings,
                         workloads_from=workloads_from)  # fmt: skip
        except PerfsuiteError as exc:
            state.points[i] = replace(p, by_time_note=f"not measured: {exc}"[:400])
        else:
            if gated.outcome.records:
                state.points[i] = replace(p, by_time=gated.outcome.records[0])
            else:
                failed = (gated.outcome.failures or [{}])[0].get("error") or "no verdict"
                state.points[i] = replace(p, by_time_note=f"not measured: {failed}"[:400])
        saved()


def _machine(device: str) -> str:
    """The digest of this machine's comparable fingerprint: a count is the same only under the same
    CPU, torch and Python (oneDNN picks its kernels by the CPU's instruction set), Valgrind and the
    steps a count takes, and how it is taken (Callgrind or the hardware counter)."""
    env = comparable(fingerprint(device=device))
    # And what counts: Valgrind (its emulated CPU is what oneDNN dispatches on), the steps counted
    # and the way of counting (a kept count of another way is counted again).
    env = {**env, "valgrind": instructions.valgrind_version(), "steps": instructions.STEPS,
           "method": instructions.METHOD_VERSION, "counter": instructions.method()}  # fmt: skip
    return hashlib.sha256(json.dumps(env, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _reusable(p: CountPoint | None, machine: str) -> bool:
    return p is not None and p.per_step is not None and p.machine == machine
