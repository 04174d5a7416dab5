"""`perfsuite list`: the workloads, their parameters, defaults and allowed values."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfsuite.core import discover, registry

NAME = "list"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def default_workloads(everything: bool, paths: Sequence[Path] = ()) -> tuple[list[str], Path | None]:
    """The workloads `list` and `check` cover when none is named, and the project's pyproject.toml.

    Inside a project whose pyproject.toml has [tool.perfsuite]: its own workloads and those of the
    `--workloads` files named, because someone benchmarking their model came for theirs, not for a
    minute of the built-ins' checks nor a table where theirs hide among them. With `everything`
    (--all), or outside such a project: every registered workload.
    """
    project = None if everything else discover.find_project(Path.cwd())
    if project is None:
        return registry.names(), None
    named = {f.resolve() for p in paths for f in discover.workload_files(Path(p))}

    def from_named(w) -> bool:  # a user's workload's source is "file:line"
        return bool(w.source) and Path(w.source.rsplit(":", 1)[0]).resolve() in named

    own = {w.name for w in discover.project_workloads(project)}
    return [n for n in registry.names() if n in own or from_named(registry.get(n))], project


def add_arguments(sub) -> None:
    ls = sub.add_parser(NAME, help="workloads with their parameters, defaults and allowed values")
    ls.add_argument(
        "--all",
        action="store_true",
        help="inside a project with [tool.perfsuite]: perfsuite's built-ins too (default: the project's)",
    )


def command(args, console, recorder) -> int:
    from rich.table import Table

    names, project = default_workloads(args.all, args.workload_paths)
    hidden = len(registry.names()) - len(names)
    t = Table(
        title="perfsuite workloads" if project is None else f"workloads of {project}",
        caption=f"{hidden} more (perfsuite's built-ins, installed packages'): perfsuite list --all" if hidden else None,
    )
    for col in ("workload", "parameter", "default", "allowed", "description"):
        t.add_column(col)
    for name in names:
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
