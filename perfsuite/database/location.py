"""Which store a command uses, and how it is named on the console.

In order: `--store` on the command line, the PERFSUITE_STORE environment variable, `store` in the
project's `[tool.perfsuite]`, and else `.perfsuite/results.db` beside the project's pyproject.toml
(or in the current folder). A path is a SQLite file; `postgresql://user@host/db` is a server
(driver psycopg). A password is never shown: every message names the store by `shown`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from perfsuite.core.discover import find_project, read_pyproject
from perfsuite.core.errors import ConfigError
from perfsuite.core.git import GIT_FAILED, run_git

ENV = "PERFSUITE_STORE"
DEFAULT = Path(".perfsuite") / "results.db"
SPOOL = Path(".perfsuite") / "spool.db"  # where results wait when the server cannot be reached
_SECRET_QUERY = {"password", "passfile", "sslpassword", "sslkey"}
_SERVER_SCHEMES = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}


@dataclass(frozen=True)
class Location:
    url: sa.URL
    source: str  # where it was chosen: "--store", "PERFSUITE_STORE", a pyproject.toml, "default"
    home: Path  # the folder whose .perfsuite/ keeps the spool (and the default store)

    @property
    def is_server(self) -> bool:
        return self.url.get_backend_name() == "postgresql"

    @property
    def path(self) -> Path | None:
        return Path(self.url.database) if not self.is_server and self.url.database else None

    @property
    def shown(self) -> str:
        """The URL as messages show it: the password hidden, in the user part and in the query
        (libpq takes `?password=` too), and secret file names left out."""
        if self.path is not None:
            return str(self.path)
        url = self.url.difference_update_query([k for k in self.url.query if k.lower() in _SECRET_QUERY])
        hidden = url.render_as_string(hide_password=True).replace("+psycopg", "")
        return hidden + ("?***" if len(url.query) != len(self.url.query) else "")

    @property
    def secrets(self) -> list[str]:
        """The secrets in the URL, to be blanked out of any message that might quote them."""
        out = [self.url.password] if self.url.password else []
        out += [str(v) for k, v in self.url.query.items() if k.lower() in _SECRET_QUERY and v]
        return out

    @property
    def spool(self) -> Path:
        """Where results wait when this store cannot take them: one spool per store, so a push
        never sends them to another (`perfsuite store push` with the same store)."""
        if self.path == self.home / SPOOL:
            return self.path  # the spool itself (pushed from with --store .perfsuite/spool.db)
        key = hashlib.sha256(self.shown.encode("utf-8", "backslashreplace")).hexdigest()[:12]
        return self.home / SPOOL.with_name(f"spool-{key}.db")


def _project_table(start: Path) -> tuple[Path | None, dict[str, Any]]:
    pyproject = find_project(start)
    if pyproject is None:
        return None, {}
    table = read_pyproject(pyproject)["tool"]["perfsuite"]
    return pyproject, table if isinstance(table, dict) else {}


def parse(text: str, source: str, home: Path) -> Location:
    """A store named by `text` (a path or a URL) from `source`; bad text is a ConfigError naming it."""
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        # Never echoed: the text may hold a password.
        raise ConfigError(
            f"{source}: the store must be a SQLite path or a postgresql:// URL (this one is empty or "
            "holds a NUL character)"
        )
    text = text.strip()
    if len(text) > 4096:
        raise ConfigError(f"{source}: the store's path or URL is {len(text)} characters long; at most 4096")
    scheme, sep, _ = text.partition("://")
    if not sep:
        path = (
            (home / Path(text).expanduser()) if not Path(text).expanduser().is_absolute() else Path(text).expanduser()
        )
        return Location(sa.URL.create("sqlite", database=str(path)), source, home)
    if scheme == "sqlite":
        try:
            url = sa.make_url(text)
        except sa.exc.ArgumentError:
            raise ConfigError(f"{source}: not a store URL: {text[:80]!r}") from None
        if not url.database or url.database == ":memory:":
            raise ConfigError(f"{source}: a SQLite store needs a file (sqlite:///path/results.db)")
        return parse(url.database, source, home)
    if scheme not in _SERVER_SCHEMES:
        raise ConfigError(f"{source}: the store must be a SQLite path or a postgresql:// URL, not {scheme}://...")
    try:
        url = sa.make_url(text).set(drivername=_SERVER_SCHEMES[scheme])
    except (sa.exc.ArgumentError, ValueError):
        raise ConfigError(f"{source}: not a PostgreSQL URL (postgresql://user@host:5432/database)") from None
    if not url.database:
        raise ConfigError(f"{source}: the URL names no database (postgresql://user@host:5432/DATABASE)")
    return Location(url, source, home)


def resolve(given: str | None = None, cwd: Path | None = None, warn: Callable[[str], object] | None = None) -> Location:
    """The store this command uses (see the module's docstring); `warn(text)` is told when a
    password sits in a file other users can read."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if given is not None:
        return parse(given, "--store", cwd)
    if os.environ.get(ENV):
        return parse(os.environ[ENV], ENV, cwd)
    pyproject, table = _project_table(cwd)
    home = pyproject.parent if pyproject is not None else cwd
    if pyproject is not None and "store" in table:  # (no table without a pyproject.toml)
        where = f"{pyproject}: [tool.perfsuite] store"
        loc = parse(table["store"], where, home)
        if loc.secrets and warn is not None and _readable_by_others(pyproject):
            warn(
                f"{pyproject} holds the store's password and other users can read it: keep the password in "
                f"~/.pgpass or {ENV} instead (chmod o-r would hide the whole file)"
            )
        return loc
    return Location(sa.URL.create("sqlite", database=str(main_worktree(home) / DEFAULT)), "default", home)


def main_worktree(folder: Path) -> Path:
    """`folder`'s place in the repository's main worktree when it lies in a linked one (`git
    worktree add`), else `folder` itself: every worktree of one repository shares one default
    store (issue 50: each got its own unless PERFSUITE_STORE was set, and `store query` in one saw
    nothing the others measured)."""
    try:
        res = run_git(folder, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-toplevel",
                      timeout=10)  # fmt: skip
    except GIT_FAILED:
        return folder
    lines = res.stdout.split("\n")
    if res.returncode != 0 or len(lines) < 3:
        return folder
    git_dir, common, top = (Path(x) for x in lines[:3])
    if git_dir == common or common.name != ".git":  # the main worktree itself, or a bare repository's
        return folder
    main = common.parent
    try:
        inside = folder.resolve().relative_to(top.resolve())
    except ValueError:
        return folder
    return main / inside if (main / inside).is_dir() else main


def _readable_by_others(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH))
    except OSError:
        return False
