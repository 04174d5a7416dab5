"""The steps a history takes beside its pairs: what a pair costs, the recheck of a screened
change, the bisection inside a confirmed span, and the profile of a confirmed change."""

from __future__ import annotations

from dataclasses import replace

from perfsuite.compare import bisection as b
from perfsuite.compare.bisect_probe import Prober, subject
from perfsuite.compare.history_walk import PairProber
from perfsuite.compare.paired_gate import GateVerdict
from perfsuite.compare.paired_history import History, Point, Window
from perfsuite.compare.settings import GateSettings, WhyOptions
from perfsuite.compare.why_sides import why_commits
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.text import printable
from perfsuite.jobs.listener import WARNING, Listener

# A pair's wall time as a share of its budget, before a log has timed its own: a 15 s gate took
# 20-27 s on the development VM (forks, builds, the heap's settling; reports/gate/load/).
PAIR_OVERHEAD = 1.8


def pair_cost_s(state: History, budget_s: float) -> float:
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


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def rechecked(prober: PairProber, a: str, b: str, budget_s: float, say: Listener) -> GateVerdict | str:
    """Stage 2 of the confirmation: `b` against `a` paired anew, in rounds of fresh processes, for
    longer (History.confirm)."""
    say.say(f"{a[:12]}..{b[:12]}: screened as a change; rechecking in rounds of fresh processes for {budget_s:g}s")
    got = prober.recheck(a, b, budget_s)
    if isinstance(got, str):
        say.say(printable(f"{b[:12]}: the recheck could not be measured ({got[:300]})"), WARNING)
    return got


def bisector(w, params, revs, device: str, settings: GateSettings, floor: float | None, say: Listener):
    """Bisection inside a confirmed change that spans several commits (a point of --every N, a
    slow drift): bisect's own probes (perfsuite.compare.bisect_probe), the span's start as good,
    its end as bad, at the history's threshold or the case's learned floor, the larger (as the
    points were judged). Bad is not probed again: the recheck that confirmed the span is its
    confirmation (its pairs set the halfway line the commits inside are classified by)."""
    probing = replace(settings, threshold=max(settings.threshold, floor or 0.0))

    def run(
        parent: str, span: list, confirmation: GateVerdict, drift: bool, direction: int = 1
    ) -> tuple[str | None, str]:
        logged = {**probing.logged(), "rule": b.PROBE_RULE, "direction": "slower" if direction > 0 else "faster"}
        state = b.Bisection(w.name, params, device, b.Commit(parent, subject(revs.repo, parent)), span, logged)
        state.probes.append(b.Probe(span[-1].sha, b.CHANGED, confirmation))
        say.say(f"bisecting the {len(span)} commits after {parent[:12]} up to {span[-1].sha[:12]}")
        with Prober(w, params, revs, parent, device, probing, direction=direction) as prober:
            answer = b.run_bisection(state, prober)
        return bisected_as(state, answer, drift, direction)

    return run


def bisected_as(state, answer, drift: bool, direction: int = 1) -> tuple[str | None, str]:
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


def profiled_ends(x: Point | Window, state: History) -> tuple[str, str]:
    """What `why` compares for a confirmed change: a point's commit against the one before it (the
    commit a bisection inside it named, against its own predecessor); a drift's end against its start."""
    if isinstance(x, Window):
        return x.start, x.end
    if not x.culprit:
        return x.parent, x.sha
    shas = [c.sha for c in state.commits]
    i = shas.index(x.culprit)
    return (shas[i - 1] if i > 0 else state.base.sha), x.culprit


def profiled(
    w, params, revs, before: str, after: str, device: str, settings: GateSettings, why: WhyOptions, say: Listener
) -> dict | None:
    """The differential profile of a confirmed change (operators and memory), to attach to it."""
    say.say(f"why: profiling {before[:12]} against {after[:12]}")
    try:
        result = why_commits(w, params, revs, before, after, device, threads=settings.threads,
                             steps=why.steps, rounds=why.rounds, top=why.top, variant=settings.variant)  # fmt: skip
    except PerfsuiteError as exc:  # the change is confirmed and logged already
        say.say(f"why could not profile {after[:12]}: {printable(str(exc))}", WARNING)
        return None
    return result.to_dict()
