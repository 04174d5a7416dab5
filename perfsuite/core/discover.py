"""Finding the user's workloads: `[tool.perfsuite]` in their pyproject.toml, `--workloads PATH`
and the `perfsuite.workloads` entry-point group (a package shipping workloads).

A workload file is imported under a private module name, with its project's root first on
sys.path so that it can `from myproj.model import Net` as the user's own code does. Importing
it registers its `@perfsuite.workload` functions. What was loaded is remembered
(`loaded_paths`) so that worker processes and the gate's sides load the same files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError, WorkloadFileError, exception_text
from perfsuite.core.registry import ENTRY_POINT_GROUP, is_perfsuites, load_entry_point
from perfsuite.core.workload import Workload

KNOWN_KEYS = {
    "workloads": "files or folders of workload modules, relative to pyproject.toml",
    "store": "the results store: a SQLite path or postgresql:// URL (perfsuite.database.location)",
}

_loaded: dict[Path, str] = {}  # resolved file -> module name
_entry_points_loaded = False
_entry_point_workloads: set[str] = set()


# A pyproject.toml larger than this is not a project's configuration.
MAX_PYPROJECT_BYTES = 4 << 20


def read_pyproject(f: Path) -> dict[str, Any]:
    """A pyproject.toml parsed, every way it can be unreadable a ConfigError naming it (an array
    nested thousands deep exhausts the parser's recursion; a huge file, memory)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
        import tomli as tomllib

    try:
        if f.stat().st_size > MAX_PYPROJECT_BYTES:
            raise ConfigError(
                f"{f}: {f.stat().st_size} bytes, more than a pyproject.toml holds "
                f"({MAX_PYPROJECT_BYTES >> 20} MiB at most)"
            )
        doc: dict[str, Any] = tomllib.loads(f.read_text(encoding="utf-8"))
        return doc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, MemoryError) as exc:
        raise ConfigError(f"{f}: not a readable TOML file ({type(exc).__name__}: {str(exc)[:200]})") from None


def find_project(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a [tool.perfsuite] table."""
    for folder in [start.resolve(), *start.resolve().parents]:
        f = folder / "pyproject.toml"
        if f.is_file():
            doc = read_pyproject(f)
            tool = doc.get("tool", {})
            if not isinstance(tool, dict):  # `tool = 5`: not ours to judge, but not a crash either
                return None
            if "perfsuite" in tool:
                return f
            return None  # the nearest project decides; a parent's configuration is not ours
    return None


def project_paths(pyproject: Path) -> list[Path]:
    """The workload paths `[tool.perfsuite]` names, checked: unknown keys and missing paths are errors."""
    table = read_pyproject(pyproject)["tool"]["perfsuite"]
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.perfsuite] must be a table")
    unknown = sorted(set(table) - set(KNOWN_KEYS))  # TOML keys are strings: sorting cannot fail
    if unknown:
        raise ConfigError(
            f"{pyproject}: [tool.perfsuite] has no key {unknown[0]!r}; known keys: "
            + ", ".join(f"{k} ({v})" for k, v in KNOWN_KEYS.items())
        )
    paths = table.get("workloads", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise ConfigError(f"{pyproject}: [tool.perfsuite] workloads must be a list of paths, got {str(paths)[:100]!r}")
    return [pyproject.parent / p for p in paths]


def workload_files(path: Path) -> list[Path]:
    """A file itself, or a folder's *.py files (recursively; private `_*`, `test_*.py`, conftest.py,
    setup.py and hidden, private or environment folders left out). A FIFO or device named like a
    module is refused: its import would block forever."""
    if path.is_file():
        return [path]
    if path.exists() and not path.is_dir():
        raise ConfigError(f"workload path {path} is not a regular file or a folder (a FIFO or a device)")
    if path.is_dir():
        # Workload files only: not tests, conftest or set-up scripts, nor what hides in private,
        # hidden or environment folders (a venv inside the project would be thousands of modules).
        from perfsuite.core.registry import is_workload_module

        skip_dirs = {"venv", "node_modules", "__pycache__", "site-packages"}

        def wanted(p: Path) -> bool:
            parts = p.relative_to(path).parts
            return is_workload_module(p.stem) and not any(
                d.startswith((".", "_")) or d in skip_dirs for d in parts[:-1]
            )

        files = sorted(p for p in path.rglob("*.py") if wanted(p) and not p.is_dir())
        for f in files:
            if not f.is_file():
                raise ConfigError(f"workload file {f} is not a regular file (a FIFO or a device); remove or rename it")
        return files
    raise ConfigError(f"workload path {path} does not exist")


def project_root(file: Path) -> Path:
    """The folder holding the nearest pyproject.toml (or .git) above the file; else its own folder."""
    for folder in file.parents:
        if (folder / "pyproject.toml").exists() or (folder / ".git").exists():
            return folder
    return file.parent


def code_roots(file: Path, code_root: Path | None = None) -> list[Path]:
    """The folders a workload file's imports are looked up in, first first, each with its src/
    layout before it. With `code_root` (the checkout a gate side measures) that checkout alone: a
    package missing at an old revision must fail there, not come silently from the working tree.
    Else the file's own project, then the project (pyproject.toml or .git) around the current
    folder: a workload folder outside the repository measures the repository you are in."""
    if code_root is not None:
        roots = [code_root]
    else:
        here = Path.cwd().resolve()
        around = next(
            (f for f in (here, *here.parents) if (f / "pyproject.toml").exists() or (f / ".git").exists()), None
        )
        roots = [project_root(file), *([around] if around is not None else [])]
    out: list[Path] = []
    for root in roots:
        for folder in (root / "src", root):
            if folder.is_dir() and folder not in out:
                out.append(folder)
    return out


def installed_code_wins() -> bool:
    """Whether this process runs in an environment asv built for one commit (`asv run A..B`): its
    benchmarks come from the current tree, the project's code from that commit, so the tree's
    copy of the project must not shadow it (asv sets ASV_ENV_TYPE; "existing" is
    `--python=same`, where the tree is what is measured)."""
    import os

    return os.environ.get("ASV") == "true" and os.environ.get("ASV_ENV_TYPE", "existing") != "existing"


def asv_commit_checkout() -> Path | None:
    """asv's checkout of the commit its environment was built for: the project's code for a
    repository that is not a package (asv.conf.json with `"install_command": []`). asv checks a
    commit out into its environment's `project` folder and names it in ASV_BUILD_DIR only while
    it installs; the folder stays for the benchmarks."""
    import os

    if os.environ.get("ASV_BUILD_DIR"):
        return Path(os.environ["ASV_BUILD_DIR"]).resolve()
    return Path(os.environ["ASV_ENV_DIR"], "project").resolve() if os.environ.get("ASV_ENV_DIR") else None


def load_file(file: Path, code_root: Path | None = None) -> str:
    """Import one workload file (once); its workloads register. Errors name the file and line.
    `code_root`: the checkout the project's own code is imported from (default: the file's project)."""
    file = file.resolve()
    if file in _loaded:
        return _loaded[file]
    name = f"_perfsuite_workloads.{file.stem}_{hashlib.sha1(str(file).encode()).hexdigest()[:8]}"
    # The user's own package imports as it does in their code, from the first of these that has it.
    if code_root is None and installed_code_wins():
        # asv's environment for one commit: the project's code is that commit's, never the tree's
        # (the workload file is the tree's): the copy asv installed, else asv's checkout, after
        # site-packages so an installed package wins.
        checkout = asv_commit_checkout()
        roots = code_roots(file, checkout) if checkout is not None else code_roots(file)
        sys.path.extend(str(f) for f in roots if str(f) not in sys.path)
    else:
        roots = code_roots(file, code_root.resolve() if code_root else None)
        for i, folder in enumerate(roots):
            if str(folder) in sys.path:
                sys.path.remove(str(folder))
            sys.path.insert(i, str(folder))
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{file}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _loaded[file] = name
    try:
        spec.loader.exec_module(module)
    except ConfigError as exc:
        del sys.modules[name]  # nothing half-loaded stays behind
        del _loaded[file]
        # A declaration error (a bad parameter, a name clash) names the workload; the line names
        # the declaration.
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(file)]
        where = f"workload file {file}, line {frames[-1].lineno}: " if frames else f"workload file {file}: "
        raise type(exc)(str(exc) if str(exc).startswith("workload file ") else where + str(exc)) from None
    except BaseException as exc:
        del sys.modules[name]
        del _loaded[file]
        if isinstance(exc, KeyboardInterrupt):
            raise
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(file)]
        line = frames[-1].lineno if frames else (getattr(exc, "lineno", None) or "?")
        user_tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        raise WorkloadFileError(f"workload file {file}, line {line}: {exception_text(exc)}\n{user_tb}") from None
    return name


def workload_in(files: Sequence[str], name: str, code_root: str | None = None) -> Workload:
    """The workload `name` as `files` declare it, the project's own code imported from `code_root`
    (a revision's checkout; None: the files' own project): what a gate side or an instruction
    count of a revision builds. The files' workloads are captured, not registered here."""
    captured: list[Workload] = []
    with registry.capturing(captured):
        for f in files:
            load_file(Path(f), Path(code_root) if code_root else None)
    matches = [w for w in captured if w.name == name]
    if not matches:
        raise LookupError(f"no workload named {name!r} in {', '.join(files)}")
    return matches[0]


def load_entry_points() -> list[str]:
    """Modules named in the `perfsuite.workloads` entry-point group of installed packages."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return []
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    before = set(registry.names())
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if is_perfsuites(ep):
            continue  # the built-ins: the registry loaded them first
        load_entry_point(ep)
        out.append(ep.value)
    _entry_point_workloads.update(set(registry.names()) - before)
    return out


def entry_point_workloads() -> frozenset[str]:
    """The workloads installed packages' entry points registered here: a worker process that loads
    the entry points finds them by name too."""
    return frozenset(_entry_point_workloads)


def discover(paths: Iterable[str | Path] = (), start: Path | None = None) -> list[Path]:
    """Load every workload the user configured: `paths` (from --workloads), [tool.perfsuite] of
    the project around `start` (default: the current folder) and installed entry points."""
    registry.names()  # the built-ins first: a user's clashing name is then the one named second
    files: list[Path] = []
    for p in paths:
        files += workload_files(Path(p))
    project = find_project(start or Path.cwd())
    if project is not None:
        for p in project_paths(project):
            files += workload_files(p)
    for f in files:
        load_file(f)
    load_entry_points()
    return files


def workload_named(name: str) -> Workload:
    """The workload called `name`: registered already (a built-in, a module the caller imported,
    the command line's discovery), else found among the project's own ([tool.perfsuite] of the
    pyproject.toml around the current folder): what a library call (perfsuite.history) names."""
    if name not in registry.names():
        discover()
    return registry.get(name)


def project_workloads(pyproject: Path | None) -> list[Workload]:
    """The registered workloads declared in the files the project's [tool.perfsuite] names (not an
    installed package's, nor another project's): what the pytest plugin and asv's expose offer."""
    roots = [p.resolve() for p in project_paths(pyproject)] if pyproject is not None else []

    def declared_here(w: Workload) -> bool:
        if not w.source:
            return False
        f = Path(w.source.rsplit(":", 1)[0]).resolve()
        return any(f == r or r in f.parents for r in roots)

    return [w for w in map(registry.get, registry.names()) if declared_here(w)]


def loaded_paths() -> tuple[str, ...]:
    """The workload files loaded in this process, for a worker or a gate side to load again."""
    return tuple(str(f) for f in _loaded)
