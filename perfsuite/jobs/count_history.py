"""`history --instructions`: every commit of a range counted once under Callgrind, each against
the last counted commit before it (perfsuite.compare.count_walk). `perfsuite history
--instructions` and perfsuite.jobs.count_history.count_history are this call."""

from __future__ import annotations

from perfsuite.compare import revisions
from perfsuite.compare.count_walk import CountHistory, walk_by_count
from perfsuite.compare.history_walk import range_commits
from perfsuite.compare.work import INSTRUCTION_THRESHOLD
from perfsuite.core.case import Case
from perfsuite.core.discover import workload_named
from perfsuite.core.errors import ConfigError
from perfsuite.jobs.count_bisect import commit_counter
from perfsuite.jobs.history_log import range_ends
from perfsuite.jobs.listener import Listener
from perfsuite.measuring import instructions
from perfsuite.run.execute import check_cases


def count_history(
    workload: str,
    range_: str,
    *,
    params: dict | None = None,
    device: str = "auto",
    threshold: float = INSTRUCTION_THRESHOLD,
    every: int = 1,
    max_commits: int = 100,
    workloads_from: str = revisions.TREE,
    listener: Listener | None = None,
) -> CountHistory:
    """Count A and every `every`-th commit after it up to B (B always) of `range_` ("A..B"), each in
    its own checkout. Refused before any count when the instructions cannot be counted here, or when
    the plan is longer than `max_commits`."""
    from perfsuite.core.config import resolve_device

    say = listener or Listener()
    w = workload_named(workload)
    params = w.resolve(params or {})
    device = resolve_device(device)
    check_cases([Case(w, params)], device).runnable()
    why = instructions.unavailable(device)
    if why is not None:
        raise ConfigError(f"--instructions: {why}")
    with revisions.Revisions(w, workloads_from) as revs:
        a, b = range_ends(range_, None)
        start, end = (
            revisions.resolve_commit(a, revs.repo, "--range"),
            revisions.resolve_commit(b, revs.repo, "--range"),
        )
        if start == end:
            raise ConfigError(f"--range {range_}: the same commit, no commit after it to count")
        base, after = range_commits(revs.repo, start, end)
        chosen = [c for i, c in enumerate(after, 1) if i % every == 0 or c is after[-1]]
        if len(chosen) + 1 > max_commits:
            raise ConfigError(
                f"--range {range_}: {len(chosen) + 1} commits to count (about {(len(chosen) + 1) * 45 / 60:.0f} min "
                f"at 30-60 s a count), more than --max-commits {max_commits}: raise it, or count every Nth (--every)"
            )

        count_at, heard = commit_counter(revs, w, params, device, say)
        say.say(
            f"{workload}: counting instructions per step under Callgrind at {len(chosen) + 1} commits "
            f"({instructions.STEPS} steps a count, 30-60 s each on a 2-core VM)"
        )
        return walk_by_count([base, *chosen], count_at, threshold, heard)
