"""`bisect --instructions`: the first first-parent commit between a good and a bad revision whose
instructions per step moved, one count per commit in its own checkout (Callgrind's, or the CPU's hardware counter's)
(perfsuite.compare.count_bisection). `perfsuite bisect --instructions` and
perfsuite.jobs.count_bisect.count_bisect are this call."""

from __future__ import annotations

from typing import Any

from perfsuite.compare import revisions
from perfsuite.compare.bisect_probe import first_parent_commits, subject
from perfsuite.compare.bisection import Commit
from perfsuite.compare.count_bisection import CountBisection, Counted, bisect_by_count
from perfsuite.compare.work import INSTRUCTION_THRESHOLD
from perfsuite.core.case import Case
from perfsuite.core.discover import workload_named
from perfsuite.core.errors import ConfigError
from perfsuite.jobs.listener import Listener
from perfsuite.measuring import instructions
from perfsuite.run.execute import check_cases


def commit_counter(revs, w, params: dict, device: str, say: Listener, counter: instructions.Counter | None = None):
    """(count_at, heard) for a walk over commits: one instruction count of `w` at a commit, in a
    worktree of its own (failed where its workload file is missing there), by `counter` (one
    Callgrind server for every commit), and the line it says."""

    def count_at(commit: Commit) -> dict[str, Any]:
        missing = revs.missing_at(commit.sha)
        if missing:
            return {"status": "failed", "reason": missing}
        with revisions.worktree(revs.repo, commit.sha) as root:
            file, code = revs.side(root)
            return instructions.count(
                w.name, params, device, files=[str(file)], code_root=str(code) if code else None, counter=counter
            )

    def heard(c: Counted) -> None:
        said = f"{c.per_step:,.0f} instructions per step" if c.per_step else f"not counted: {c.reason}"
        say.say(f"{c.commit.sha[:12]} {c.commit.subject}: {said} [{c.seconds or 0:.0f}s]")

    return count_at, heard


def count_bisect(
    workload: str,
    good: str,
    bad: str,
    *,
    params: dict | None = None,
    device: str = "auto",
    threshold: float = INSTRUCTION_THRESHOLD,
    faster: bool = False,
    workloads_from: str = revisions.TREE,
    listener: Listener | None = None,
) -> CountBisection:
    """Count good and bad, then bisect the commits between by count (`faster`: the commit that
    removed instructions). Refused before any count when the instructions cannot be counted here."""
    from perfsuite.core.config import resolve_device

    say = listener or Listener()
    w = workload_named(workload)
    params = w.resolve(params or {})
    device = resolve_device(device)
    check_cases([Case(w, params)], device).runnable()
    with revisions.Revisions(w, workloads_from) as revs:
        good_sha = revisions.resolve_commit(good, revs.repo, "--good")
        bad_sha = revisions.resolve_commit(bad, revs.repo, "--bad")
        commits = first_parent_commits(revs.repo, good_sha, bad_sha)
        why = instructions.unavailable(device)
        if why is not None:
            raise ConfigError(f"--instructions: {why}")

        say.say(
            f"{workload}: counting instructions per step at {len(commits) + 1} commits at most, {instructions.described()}"
        )
        good_commit = Commit(good_sha, subject(revs.repo, good_sha))
        with instructions.Counter() as counter:
            count_at, heard = commit_counter(revs, w, params, device, say, counter)
            return bisect_by_count(commits, good_commit, count_at, threshold, -1 if faster else 1, heard)
