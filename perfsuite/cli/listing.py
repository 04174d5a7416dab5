"""`perfsuite list` (workloads, their parameters) and `perfsuite suites` (the shipped suites)."""

from __future__ import annotations


def cmd_list(args, console) -> int:
    from rich.table import Table

    from perfsuite.core import registry

    t = Table(title="perfsuite workloads")
    for col in ("workload", "parameter", "default", "allowed", "description"):
        t.add_column(col)
    for name in registry.names():
        w = registry.get(name)
        # A user's workload says where it is declared, so two projects' names are told apart.
        about = w.description + (f" ({w.source})" if not w.builtin else "")
        if not w.params:
            t.add_row(name, "-", "-", "-", about)
        sweep = w.sweep or {}
        for i, p in enumerate(w.params):
            default = ",".join(map(str, sweep[p.name])) + " (sweep)" if p.name in sweep else str(p.default)
            t.add_row(name if i == 0 else "", p.name, default, p.allowed(), about if i == 0 else p.help)
    console.print(t)
    return 0


def cmd_suites(args, console) -> int:
    from rich.table import Table

    from perfsuite.run.suite_file import load_suite, shipped_suites_dir

    t = Table(title=f"suites in {shipped_suites_dir()}")
    for col in ("name", "entries", "workloads", "description"):
        t.add_column(col)
    for path in sorted(shipped_suites_dir().glob("*.yaml")):
        from perfsuite.run.suite_file import parse_yaml

        doc = parse_yaml(path)
        suite = load_suite(path)
        t.add_row(path.stem, str(len(suite.entries)), ", ".join(sorted({e.workload for e in suite.entries})),
                  str(doc.get("description", "")))
    console.print(t)
    return 0
