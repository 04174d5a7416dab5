"""Workloads registered by name. Definitions import no torch; only building a step does.

A workload comes in one way: `@perfsuite.workload` (perfsuite/user/declare.py) builds its
`Workload` and calls `register`, for perfsuite's own workloads and a user's alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from perfsuite.core.errors import ConfigError, WorkloadFileError
from perfsuite.core.workload import Workload

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

# The entry-point group a package's workloads are registered under; perfsuite's own is one of them.
ENTRY_POINT_GROUP = "perfsuite.workloads"

_REGISTRY: dict[str, Workload] = {}
_loaded = False


_capture: list[Workload] | None = None


def register(workload: Workload) -> Workload:
    """Add a declared workload (what @perfsuite.workload calls; workload files of revisions from
    before every built-in used it call it directly, and the gate loads those beside this core)."""
    if _capture is not None:  # loading another revision's module: keep it out of the registry
        _capture.append(workload)
        return workload
    if workload.name in _REGISTRY:
        earlier = _REGISTRY[workload.name]
        # One of perfsuite's own is named as such: its file is not the user's to rename.
        first = "perfsuite's built-in workloads" if earlier.builtin else earlier.source
        raise ConfigError(
            f"workload {workload.name!r} is declared twice: in {first} and in "
            f"{workload.source or 'perfsuite'}; rename one of them"
        )
    _REGISTRY[workload.name] = workload
    return workload


def is_workload_module(stem: str) -> bool:
    """Whether a module in a workload folder declares workloads (perfsuite's own folder and a
    user's alike): not private (`_*`), not a test, conftest or set-up script."""
    return not stem.startswith(("_", "test_")) and stem not in ("conftest", "setup")


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        # The built-ins come in through perfsuite's own `perfsuite.workloads` entry point, the way
        # an installed package's workloads do: the core names no module above it.
        _load_builtin_entry_point()


def is_perfsuites(ep: EntryPoint) -> bool:
    """Whether `ep` is perfsuite's own. A package whose metadata cannot be read (issue 51: a
    METADATA with a non-UTF-8 byte made every workload command exit 4) is not perfsuite."""
    try:
        return ep.dist is not None and ep.dist.name == "perfsuite"
    except (UnicodeDecodeError, ValueError, OSError):
        return False


def load_entry_point(ep: EntryPoint) -> None:
    try:
        ep.load()
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the package's code (even sys.exit at import): name it
        raise WorkloadFileError(
            f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) "
            f"failed to load: {type(exc).__name__}: {exc}"
        ) from None


def _load_builtin_entry_point() -> None:
    """perfsuite's own workloads, through its entry point in the `perfsuite.workloads` group."""
    from importlib.metadata import entry_points

    own = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if is_perfsuites(ep)]
    if not own:
        own = _checkout_entry_points()
    if not own:
        raise ConfigError(
            f"perfsuite's built-in workloads are not registered: the installed perfsuite has no "
            f"{ENTRY_POINT_GROUP!r} entry point (installed before it was declared, or not installed). "
            f"Reinstall it: pip install -e <your perfsuite checkout>"
        )
    for ep in own:
        load_entry_point(ep)


def _checkout_entry_points() -> list[EntryPoint]:
    """perfsuite run from a source checkout on PYTHONPATH, not installed (a lent GPU machine, a
    gate side's worktree): the entry points its pyproject.toml declares, read from that file, so
    the declaration stays in one place."""
    from importlib.metadata import EntryPoint

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
        import tomli as tomllib

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    if doc.get("project", {}).get("name") != "perfsuite":
        return []
    declared = doc["project"].get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in declared.items()]


def names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get(name: str) -> Workload:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown workload {name!r}; known workloads: {', '.join(names())}") from None


@contextmanager
def capturing(into: list[Workload]) -> Iterator[list[Workload]]:
    """Within the block, `register` appends to `into` instead of registering."""
    global _capture
    _load_builtin()
    previous, _capture = _capture, into
    try:
        yield into
    finally:
        _capture = previous
