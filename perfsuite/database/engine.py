"""Opening a store: an engine with the right settings for its kind, the schema migrated to head.

An older store is migrated forward (Alembic, perfsuite/database/migrations); a store written by a newer
perfsuite is refused, as are a schema revision no perfsuite writes, a file that is not a SQLite
database, and a store or spool in `.perfsuite/` that is a symbolic link. A server that cannot be reached
is StoreUnreachable, which the recorder answers by keeping results in the local spool; wrong
credentials are a StoreError before anything is measured. No message carries the password.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from perfsuite.core.errors import PerfsuiteError, StorageError
from perfsuite.core.state import STATE_DIR, state_folder
from perfsuite.database.location import ENV, Location

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.pool import ConnectionPoolEntry

MIGRATIONS = Path(__file__).with_name("migrations")
# How long a writer waits for another's lock (SQLite) and for a server to answer (PostgreSQL).
BUSY_TIMEOUT_S = 60
CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_S = 120
# A lock key all perfsuite processes share while migrating one PostgreSQL store.
_PG_MIGRATION_LOCK = 0x70657266


class StoreError(PerfsuiteError):
    """The store cannot be used as it is (a newer schema, a corrupted file, wrong credentials)."""


class StoreUnreachable(StoreError):
    """The server did not answer: results are kept locally until `perfsuite store push`."""


# The migrations' revisions, oldest first (migrations/versions; a test holds this to Alembic's own
# list). Kept here so that opening an up-to-date store imports no Alembic: every command opens
# one, and Alembic with Mako costs a third of a second to import.
REVISIONS = ("0001", "0002")
HEAD = REVISIONS[-1]
# How a later perfsuite will name its revisions (migrations/versions numbers them): a revision of
# another shape was not written by any perfsuite.
_REVISION_SHAPE = re.compile(r"[0-9]{4}")
# Who may choose a store that is a symbolic link: the user, on the command line or in the
# environment (a store kept on another disk through a link is theirs to choose). The files in a
# project's `.perfsuite/` named otherwise (the default store, a spool, a pyproject.toml's choice)
# may have come with a cloned repository, which can plant links as it can plant a `.perfsuite`
# link (refused by perfsuite.core.state): never followed, so nothing outside the project is
# written into, or deleted from by `store push`.
_CHOSEN_BY_THE_USER = ("--store", ENV)


def _config(connection: sa.Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    cur = dbapi_connection.cursor()
    # WAL: readers never wait for a writer and a killed writer's transaction is rolled back on
    # the next open; busy_timeout: concurrent writers queue instead of failing.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


WRITE = {"perfsuite_write": True}  # execution options of a connection that will write


def _sqlite_begin(conn: sa.Connection) -> None:
    # pysqlite starts transactions lazily, after the first read: two writers that both read first
    # then deadlock on the upgrade. A writer's BEGIN IMMEDIATE takes the write lock up front
    # (SQLAlchemy's recipe for pysqlite); readers begin plainly and never wait for one.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("perfsuite_write") else "BEGIN")


def engine_for(location: Location) -> sa.Engine:
    """An engine for `location` (nothing is connected yet)."""
    if location.is_server:
        try:
            import psycopg  # noqa: F401 - the driver SQLAlchemy loads for postgresql+psycopg
        except ImportError:
            raise StoreError(
                f"store {location.shown}: PostgreSQL needs its driver: pip install 'perfsuite[postgres]' (psycopg)"
            ) from None
        # Keepalives and a statement timeout: a connection that went half-open mid-run (a partition,
        # a host gone) fails within a minute and the result goes to the spool, instead of a write
        # blocking for the kernel's 15-minute retransmission timeout.
        return sa.create_engine(
            location.url,
            pool_pre_ping=True,
            connect_args={
                "connect_timeout": CONNECT_TIMEOUT_S,
                "application_name": "perfsuite",
                "keepalives": 1,
                "keepalives_idle": 10,
                "keepalives_interval": 5,
                "keepalives_count": 3,
                "tcp_user_timeout": 30_000,
                "options": f"-c statement_timeout={STATEMENT_TIMEOUT_S * 1000} -c lock_timeout={BUSY_TIMEOUT_S * 1000}",
            },
        )
    path = location.path
    assert path is not None  # a SQLite store names its file (location.parse)
    try:
        state_folder(path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
    except StorageError as exc:
        raise StoreError(f"store {path}: {exc}") from None
    except OSError as exc:
        raise StoreError(f"store {path}: cannot create its folder ({exc.strerror})") from None
    if path.is_dir():
        raise StoreError(f"store {path}: is a folder; give a file path (e.g. {path / 'results.db'})")
    engine = sa.create_engine(location.url, connect_args={"timeout": BUSY_TIMEOUT_S, "isolation_level": None})
    sa.event.listen(engine, "connect", _sqlite_pragmas)
    sa.event.listen(engine, "begin", _sqlite_begin)
    return engine


def _unreachable(exc: Exception) -> bool:
    """A connection that failed or broke (retry, then spool), not a statement the server refused
    (which no retry fixes): SQLSTATE class 08 (connection) or 57P (the server shutting down), or
    no SQLSTATE at all from a connection attempt."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    state: str | None = getattr(getattr(exc, "orig", None), "sqlstate", None)  # the driver's SQLSTATE
    if state is None:
        return isinstance(exc, sa.exc.OperationalError)
    return state.startswith("08") or state.startswith("57P")


def describe_failure(location: Location, exc: Exception) -> StoreError:
    """What went wrong with `location`, in words, without the password."""
    first = str(getattr(exc, "orig", exc)).strip()
    text = first.splitlines()[0] if first else type(exc).__name__
    for secret in location.secrets:
        text = text.replace(secret, "***")
    if location.is_server:
        state = getattr(getattr(exc, "orig", None), "sqlstate", None) or ""
        if (
            state.startswith("28")
            or "password authentication failed" in text
            or "authentication" in text.lower()
            or ("role" in text and "does not exist" in text)
        ):
            return StoreError(
                f"store {location.shown}: the server refused the credentials ({text}); "
                "check the user and password (~/.pgpass or PERFSUITE_STORE)"
            )
        if state == "3D000" or ("does not exist" in text and "database" in text):
            return StoreError(f"store {location.shown}: {text}; create it first (createdb)")
        if state == "42501" or "permission denied" in text:
            return StoreError(
                f"store {location.shown}: {text}; the store's user needs to create tables in the "
                "database's public schema (once) and to insert and select in them"
            )
        if "invalid" in text and ("value" in text or "option" in text or "URI" in text):
            return StoreError(f"store {location.shown}: the URL is not valid for the server's client ({text})")
        if _unreachable(exc):
            return StoreUnreachable(f"store {location.shown}: cannot reach the server ({text})")
        return StoreError(f"store {location.shown}: the server refused a write ({text})")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return StoreError(
            f"store {location.shown}: not a readable SQLite database ({text}); move the file aside "
            "and rebuild the store from JSON results with `perfsuite store import`"
        )
    if "locked" in text:
        return StoreError(f"store {location.shown}: locked by another writer for over {BUSY_TIMEOUT_S} s ({text})")
    if "readonly" in text or "unable to open" in text:
        return StoreError(f"store {location.shown}: cannot write the file ({text})")
    return StoreError(f"store {location.shown}: {text or type(exc).__name__}")


@contextlib.contextmanager
def _migration_lock(location: Location, conn: sa.Connection) -> Iterator[None]:
    if location.is_server:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        yield
        return
    path = location.path
    assert path is not None  # a SQLite store names its file (location.parse)
    lock = path.with_name(path.name + ".migrate-lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise StoreError(f"store {location.shown}: cannot create {lock.name} beside it ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def current_revision(conn: sa.Connection) -> str | None:
    """The store's schema revision (Alembic's version table), None for a database without one."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    versions: list[str] = [row[0] for row in conn.execute(sa.text("SELECT version_num FROM alembic_version"))]
    return versions[0] if len(versions) == 1 else ",".join(versions) or None


def migrate(location: Location, engine: sa.Engine) -> str | None:
    """Bring the store to this perfsuite's schema; returns the revision it was at (None: new)."""
    with engine.connect() as conn:
        before = current_revision(conn)
        conn.rollback()
    if before == HEAD:
        return before
    _refuse_newer(location, before)
    with engine.connect() as conn, conn.execution_options(**WRITE).begin(), _migration_lock(location, conn):
        again = current_revision(conn)  # another process may have migrated while we waited
        _refuse_newer(location, again)
        _refuse_foreign(location, conn, again)
        if again is None and not sa.inspect(conn).get_table_names():
            _create(conn)
        elif again != HEAD:
            from alembic import command

            command.upgrade(_config(conn), "head")
    return before


def _create(conn: sa.Connection) -> None:
    """A new, empty store made at head at once, as Alembic's cookbook does it (create_all, then
    stamp head): the tables of schema.py (which a test holds equal to what the migrations build)
    and the version row, without importing Alembic."""
    from perfsuite.database.schema import metadata

    metadata.create_all(conn)
    version = sa.Table("alembic_version", sa.MetaData(), sa.Column("version_num", sa.String(32), primary_key=True))
    version.create(conn)
    conn.execute(version.insert().values(version_num=HEAD))


def _refuse_newer(location: Location, revision: str | None) -> None:
    """A revision this perfsuite does not know: a newer perfsuite's, or none perfsuite writes."""
    if revision is None or revision in REVISIONS:
        return
    if _REVISION_SHAPE.fullmatch(revision) and revision > HEAD:
        raise StoreError(
            f"store {location.shown}: schema revision {revision!r} was written by a newer perfsuite "
            f"(this one knows up to {HEAD}); upgrade perfsuite to use it"
        ) from None
    shown = repr(revision[:32]) + (f"... ({len(revision)} characters)" if len(revision) > 32 else "")
    raise StoreError(
        f"store {location.shown}: damaged, or not a perfsuite store: its schema revision {shown} is "
        f"none a perfsuite writes (this one knows {', '.join(REVISIONS)}); move it aside and rebuild the "
        "store from JSON results with `perfsuite store import`"
    ) from None


def refuse_planted_link(path: Path | None, source: str) -> None:
    """A store or spool in a `.perfsuite/` folder that is a symbolic link is refused, unless the
    user named it (see _CHOSEN_BY_THE_USER). (SQLite itself never follows a link in place of its
    -wal or -journal file: it removes the link.)"""
    if path is None or source in _CHOSEN_BY_THE_USER or STATE_DIR not in path.parts:
        return
    try:
        target = os.readlink(path) if path.is_symlink() else None
    except OSError as exc:  # a name too long, a folder that cannot be listed
        raise StoreError(f"store {path}: cannot use this path ({exc.strerror})") from None
    if target is not None:
        raise StoreError(
            f"refusing to use {path}: it is a symbolic link (to {target}); perfsuite keeps its state "
            "inside the project (give --store PATH to use a store elsewhere)"
        )


def open_engine(location: Location, create: bool = True) -> sa.Engine:
    """A migrated engine for `location`; StoreError (StoreUnreachable for a silent server) otherwise.
    `create=False` (a reader): an empty database is "no store there yet", never made into one."""
    refuse_planted_link(location.path, location.source)
    if location.path is not None and location.path.exists():
        # Checked through a plain connection first: ours switches the file to WAL, which would
        # change someone else's database before it is refused.
        preflight(location)
    engine = engine_for(location)
    try:
        if location.path is not None and location.path.exists() and location.path.stat().st_size:
            _check_sqlite_header(location)
        if not create:
            with engine.connect() as conn:
                revision = current_revision(conn)
                _refuse_foreign(location, conn, revision)
            if revision is None:
                raise StoreError(
                    f"store {location.shown}: no store there yet (nothing has been stored; it is "
                    f"chosen by {location.source})"
                )
        migrate(location, engine)
    except sa.exc.DBAPIError as exc:
        engine.dispose()
        raise describe_failure(location, exc) from None
    except StoreError:
        engine.dispose()
        raise
    return engine


def preflight(location: Location) -> None:
    """Whether `location` can take results, found before anything is measured and without writing:
    a server answers with credentials it accepts and a schema this perfsuite knows; a SQLite file
    is one, of such a schema, or can be created. StoreError says what is wrong (StoreUnreachable:
    the server did not answer)."""
    refuse_planted_link(location.path, location.source)
    if location.spool != location.path:  # where the results would wait, should the store fail mid-run
        refuse_planted_link(location.spool, "spool")
    if location.is_server:
        engine = engine_for(location)
        try:
            with engine.connect() as conn:
                revision = current_revision(conn)
                _refuse_foreign(location, conn, revision)
                missing = _missing_rights(conn, revision)
        except sa.exc.DBAPIError as exc:
            raise describe_failure(location, exc) from None
        finally:
            engine.dispose()
        _refuse_newer(location, revision)
        if missing:
            raise StoreError(
                f"store {location.shown}: this user may not {missing}; the store's user needs to "
                "create tables in the public schema (once) and to insert and select in them"
            )
        return
    path = location.path
    assert path is not None  # a SQLite store names its file (location.parse)
    try:
        return _preflight_file(location, path)
    except OSError as exc:  # a name too long, a folder that cannot be listed
        raise StoreError(f"store {location.shown}: cannot use this path ({exc.strerror})") from None


def _preflight_file(location: Location, path: Path) -> None:
    if path.is_symlink() and not path.exists():  # SQLite would create the file the link points at
        raise StoreError(f"store {path}: a symbolic link to nothing; refusing to create what it points at")
    if path.is_dir():
        raise StoreError(f"store {path}: is a folder; give a file path (e.g. {path / 'results.db'})")
    if path.exists() and not path.is_file():
        raise StoreError(f"store {path}: not a regular file (a device, a pipe or a socket); give a file path")
    if path.exists():
        if path.stat().st_size:
            _check_sqlite_header(location)
        if not os.access(path, os.R_OK | os.W_OK):
            raise StoreError(f"store {path}: cannot read and write the file (permissions)")
        engine = sa.create_engine(location.url, connect_args={"timeout": BUSY_TIMEOUT_S})
        try:
            with engine.connect() as conn:
                revision = current_revision(conn)
                _refuse_foreign(location, conn, revision)
        except sa.exc.DBAPIError as exc:
            raise describe_failure(location, exc) from None
        finally:
            engine.dispose()
        _refuse_newer(location, revision)
        return
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"store {path}: cannot create it ({folder} is not a writable folder)")


def _refuse_foreign(location: Location, conn: sa.Connection, revision: str | None) -> None:
    """A database with tables but no store version is someone else's: never written into."""
    if revision is None:
        tables = sorted(sa.inspect(conn).get_table_names())
        if tables:
            raise StoreError(
                f"store {location.shown}: a database that is not a perfsuite store (it holds "
                f"{', '.join(tables[:5])}{'...' if len(tables) > 5 else ''}); give an empty database "
                "or a new file"
            )


def _missing_rights(conn: sa.Connection, revision: str | None) -> str | None:
    """On PostgreSQL, what this user may not do that the store needs (None: nothing)."""
    if revision is None or revision != HEAD:  # the store's tables are to be created or migrated
        if not conn.execute(sa.text("SELECT has_schema_privilege('public', 'CREATE')")).scalar():
            return "create tables in the public schema"
    if revision is not None:
        for table in ("machines", "runs", "records"):
            if not conn.execute(sa.text("SELECT has_table_privilege(:t, 'INSERT')"), {"t": table}).scalar():
                return f"insert into {table}"
    return None


def _check_sqlite_header(location: Location) -> None:
    # SQLite opens any file lazily; a foreign file would only fail at the first query, deep inside
    # Alembic. The 16-byte header says at once.
    assert location.path is not None  # a SQLite store names its file (location.parse)
    with open(location.path, "rb") as f:
        head = f.read(16)
    if head != b"SQLite format 3\x00":
        raise StoreError(
            f"store {location.shown}: not a SQLite database (the file starts {head[:8]!r}); "
            "move it aside and rebuild the store with `perfsuite store import`"
        )
