"""`perfsuite history --instructions`: the history by instruction count (perfsuite.jobs.count_history),
one line per commit, its summary, each flagged commit's gate by time against its parent, its log and
page, and the exit status CI reads: 1 when a commit added instructions past the threshold (the
count's, whatever time said)."""

from __future__ import annotations

from rich.text import Text

from perfsuite.cli.console import ConsoleListener
from perfsuite.core.params import single_values
from perfsuite.core.text import printable


def by_count(args, console, w) -> int:
    from perfsuite.compare.settings import GateSettings
    from perfsuite.compare.work import INSTRUCTION_THRESHOLD
    from perfsuite.jobs.count_history import count_history

    # Each flagged commit is gated by time against its parent at the time gate's own threshold (1%),
    # unless --count-only; the verdicts are kept in the log beside the counts.
    by_time = None
    if not args.count_only:
        by_time = GateSettings(args.budget, args.builds, 0.01, args.fdr, args.threads, args.heap, args.variant,
                               args.energy)  # fmt: skip

    with console.status("counting") as status:
        run = count_history(
            w.name,
            args.range_,
            update=args.update,
            params=single_values(args.param, w),
            device=args.device,
            threshold=INSTRUCTION_THRESHOLD if args.threshold is None else args.threshold,
            every=args.every,
            max_commits=args.max_commits,
            log=args.log,
            html=args.html,
            workloads_from=args.workloads_from,
            listener=ConsoleListener(console, status),
            by_time=by_time,
        )
    for line in run.state.lines():
        console.print(Text(printable(line), style="red" if "<- more" in line else ""), soft_wrap=True)
    console.print(Text(printable(run.state.summary())), soft_wrap=True)
    # Exit 1 for what this run counted only: a nightly --update stays red for a new commit, not for
    # one an earlier run already reported (as the time history's outcome is about what is new).
    added = [p.sha[:12] for p in run.state.changed(1) if p.sha in run.fresh]
    if added:
        console.print(
            Text(printable(f"counted in this run and added instructions: {', '.join(added)}")), soft_wrap=True
        )
    for line in run.state.time_lines():
        console.print(Text(printable(line)), soft_wrap=True)
    console.print(Text(printable(f"log: {run.log}  page: {run.page}")), soft_wrap=True)
    return 1 if added else 0
