"""`perfsuite compare BASE NEW`: case-by-case verdicts against the noise between runs, exit 1 on a
slower case, 5 when none is slower but one is undecided."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from perfsuite.cli import options, values
from perfsuite.cli.console import make_console
from perfsuite.compare.records import compare_records
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.text import printable
from perfsuite.report.tables import comparison_table
from perfsuite.stats.verdict import EXIT_UNDECIDED, UNDECIDED_ADVICE
from perfsuite.storage.files import load_records

NAME = "compare"


def add_arguments(sub) -> None:
    cmp = sub.add_parser(NAME, help="compare two results files case by case")
    cmp.add_argument(
        "base",
        type=Path,
        nargs="+",
        help="the base's results; three or more runs of a case teach compare how much separate "
        "runs of unchanged code differ",
    )
    cmp.add_argument("new", type=Path)
    cmp.add_argument(
        "--threshold",
        type=values.positive_float("--threshold"),
        default=0.05,
        help="slowdown that fails the comparison, as a fraction (default 0.05)",
    )
    cmp.add_argument(
        "--alpha", type=values.fraction("--alpha"), default=0.01, help="significance level of the test (default 0.01)"
    )
    cmp.add_argument(
        "--allow-env-mismatch", action="store_true", help="compare records measured in different environments"
    )
    options.floors(cmp, "noise floors per case, learned with `gate --learn-floor`, used when the file exists")
    cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")


def command(args, console, recorder) -> int:
    base = [r for path in args.base for r in load_records(path)]  # runs in the order given: the last is compared
    new = load_records(args.new)
    floors = None
    if args.floors is not None and args.floors.exists():
        from perfsuite.storage.files import load_document

        floors = load_document(args.floors, "noise-floors")
    cmp = compare_records(
        base, new, threshold=args.threshold, alpha=args.alpha, allow_env_mismatch=args.allow_env_mismatch, floors=floors
    )
    if not cmp.cases:
        raise PerfsuiteError(f"{', '.join(map(str, args.base))} and {args.new} have no case in common")
    if args.json:
        from perfsuite.storage.files import dumps

        # Strict JSON: a ratio of infinity or NaN is written as null, which every parser reads.
        print(
            dumps(
                {
                    "cases": [c.to_dict() for c in cmp.cases],
                    "only_base": cmp.only_base,
                    "only_new": cmp.only_new,
                    "regressed": cmp.regressed,
                },
                indent=1,
            )
        )
    else:
        console.print(comparison_table(cmp))
        for c in cmp.cases:
            if c.basis != "samples":
                console.print(Text(printable(f"{c.label}: compared on {c.basis}")))
            for w in c.warnings:  # not refused, but the two sides were not measured alike
                console.print(Text("warning ", style="yellow") + Text(printable(f"{c.label}: {w}")))
        for label in cmp.only_base:
            console.print(Text(printable(f"only in base: {label}")))
        for label in cmp.only_new:
            console.print(Text(printable(f"only in new: {label}")))
    # On stderr, so that --json output stays one JSON document.
    err = make_console(stderr=True)
    if cmp.regressed:
        err.print(
            Text("slower", style="bold red")
            + Text(f" beyond {args.threshold:.0%} and the noise between runs (significant at p < {args.alpha})")
        )
    elif cmp.exit_code == EXIT_UNDECIDED:
        err.print(
            Text("undecided", style="yellow")
            + Text(
                f": the interval reaches past {args.threshold:.0%} either way, so a change that large can "
                f"be neither ruled out nor confirmed from these separate runs; {UNDECIDED_ADVICE} "
                "(or one interleaved `perfsuite gate`)"
            )
        )
    return cmp.exit_code
