"""`perfsuite check`: the workloads' correctness checks."""

from __future__ import annotations

from rich.text import Text

from perfsuite.cli import options
from perfsuite.cli.listing import default_workloads
from perfsuite.core import registry
from perfsuite.core.errors import ConfigError
from perfsuite.suite.correctness import EXIT_FAILED, CheckResult, checks_for, run_checks

NAME = "check"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    chk = sub.add_parser(
        NAME,
        help="run the workloads' correctness checks (gradcheck, AMP loss, resume, early stopping); exit 3 on a failure",
    )
    chk.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help="default: inside a project with [tool.perfsuite] its workloads, elsewhere every workload",
    )
    chk.add_argument("--all", action="store_true", help="every workload, perfsuite's built-ins included")
    options.device(chk, "cpu", "cpu (default) | cuda | cuda:N | auto")


def command(args, console, recorder) -> int:
    from perfsuite.core.config import resolve_device

    if args.workloads and args.all:
        raise ConfigError("name workloads or give --all, not both")
    device = resolve_device(args.device)
    names, project = (args.workloads, None) if args.workloads else default_workloads(args.all, args.workload_paths)
    if project is not None:
        console.print(
            Text(
                f"checking the workloads of {project} ({len(names)}); --all checks perfsuite's built-ins too",
                style="dim",
            )
        )
    for w in names:
        registry.get(w)  # bad input (exit 2) before any check runs
    without = [w for w in names if not checks_for(w)]

    def show(res: CheckResult) -> None:
        console.print(Text(res.line(), style="" if res.ok else "bold red"))

    results = run_checks([w for w in names if checks_for(w)], device, report=show)
    for w in without:
        console.print(Text(f"-     {w}: no correctness checks"))
    failed = [r for r in results if not r.ok]
    console.print(
        Text(
            f"checks on {device}: {len(results) - len(failed)} ok, {len(failed)} failed",
            style="bold red" if failed else "green",
        )
    )
    return EXIT_FAILED if failed else 0
