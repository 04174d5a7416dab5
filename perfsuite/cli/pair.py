"""`perfsuite pair`: two values of one parameter, interleaved."""

from __future__ import annotations

import contextlib

from perfsuite.cli import options
from perfsuite.cli.events import EntryEvents
from perfsuite.compare.pair import Pair
from perfsuite.core import registry
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.params import expand_sweep, parse_assignments
from perfsuite.run.execute import interrupted_exit
from perfsuite.storage.folder import folder_of

NAME = "pair"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    pr = sub.add_parser(NAME, help="two values of one parameter, interleaved: time ratio with CI, saved-memory ratio")
    pr.add_argument("workload")
    pr.add_argument("--vary", required=True, metavar="KEY=A,B", help="e.g. impl=custom,builtin")
    options.params(pr, sweep=True)
    options.device(pr)
    options.budget(pr, 5.0, "seconds per case (default 5)")
    options.json_out(pr, "--out", "JSON file to write (must not exist)")


def command(args, console, recorder) -> int:
    """`perfsuite pair`: each case's time ratio A/B with its CI, written case by case with --out;
    a case that fails is recorded with its reason and the rest go on (exit 3)."""
    from perfsuite.core.config import RunConfig, resolve_device
    from perfsuite.run.execute import Case, check_cases, run_cases

    w = registry.get(args.workload)
    varied = parse_assignments([args.vary], w.params, w.name)
    ((key, values),) = varied.items()
    if len(values) != 2:
        raise PerfsuiteError(f"--vary expects exactly two values of {key!r}, got {len(values)}")
    sweep = parse_assignments(args.param, w.params, w.name)
    if key in sweep:
        raise PerfsuiteError(f"parameter {key!r} is given both by --vary and -p")
    device = resolve_device(args.device)
    cases = [Case(w, c) for c in expand_sweep(sweep)]
    measure = Pair(key, values[0], values[1])
    checked = check_cases(cases, device, measure).runnable()  # bad values: errors before --out is claimed
    # Claimed before measuring: an existing file is refused, and no finished pair is thrown away;
    # an empty claim is removed when the command ends.
    with contextlib.ExitStack() as held:
        writer = None
        if args.out is not None:
            folder, name = held.enter_context(folder_of(args.out))
            writer = folder.document(name, "pair")
        out = run_cases(
            checked,
            RunConfig(device=device, max_time=args.budget),
            outputs=(writer, recorder),
            events=EntryEvents(console, w.name),
        )
    if out.interrupted:
        return interrupted_exit(out.interrupted)
    return 3 if out.failures else 0
