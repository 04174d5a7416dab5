"""`perfsuite suites`: the suite files shipped with perfsuite."""

from __future__ import annotations

from perfsuite.suite.file import load_suite, parse_yaml, shipped_suites_dir

NAME = "suites"


def add_arguments(sub) -> None:
    sub.add_parser(NAME, help="the suite files shipped with perfsuite")


def command(args, console, recorder) -> int:
    from rich.table import Table

    t = Table(title=f"suites in {shipped_suites_dir()}")
    for col in ("name", "entries", "workloads", "description"):
        t.add_column(col)
    for path in sorted(shipped_suites_dir().glob("*.yaml")):
        doc = parse_yaml(path)
        suite = load_suite(path)
        t.add_row(
            path.stem,
            str(len(suite.entries)),
            ", ".join(sorted({e.workload for e in suite.entries})),
            str(doc.get("description", "")),
        )
    console.print(t)
    return 0
