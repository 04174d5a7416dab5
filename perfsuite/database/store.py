"""Store: write machines, runs, records and documents; query them. The one interface every road
and reader uses, the same on SQLite and PostgreSQL.

Every write is one transaction and inserts only what is absent (a record by its id or digest, a
document by its digest, a run or machine by its id), so writes can be retried, imported twice and
pushed from a spool without duplicating anything, and a writer killed mid-way leaves either the
whole row or nothing.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Literal

import sqlalchemy as sa

from perfsuite.core.documents import finite
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Record
from perfsuite.database import schema
from perfsuite.database.engine import WRITE, StoreError, describe_failure, open_engine
from perfsuite.database.location import Location
from perfsuite.database.machine import Machine


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def canonical(obj: Any) -> str:
    """The JSON text a store keeps: sorted keys, no spaces, strict (no NaN)."""
    return json.dumps(finite(obj), sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)


def record_digest(record: Record) -> str:
    """The measurement itself, without its id and creation time (see the module's docstring)."""
    body = {k: v for k, v in record.to_dict().items() if k not in ("id", "created", "derived")}
    return hashlib.sha256(canonical(body).encode()).hexdigest()


def document_digest(kind: str, entry: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical({"kind": kind, "doc": entry}).encode()).hexdigest()[:32]


def new_run(
    kind: str,
    machine: Machine,
    *,
    config: Mapping[str, Any] | None = None,
    commit: str | None = None,
    dirty: bool | None = None,
    batch: str | None = None,
    shard: int | None = None,
    shards: int | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """The row of a run about to start."""
    return {
        "id": run_id or uuid.uuid4().hex,
        "kind": kind,
        "machine_id": machine.id,
        "commit": commit,
        "dirty": dirty,
        "config": canonical(config or {}),
        "started": now(),
        "finished": None,
        "state": "running",
        "batch": batch,
        "shard": shard,
        "shards": shards,
    }


def column_text(value: object, limit: int) -> str:
    """Text a column of either engine takes: no NUL (PostgreSQL refuses it), no lone surrogate
    (not UTF-8), at most `limit` characters. The record's own JSON keeps the exact value."""
    text = str(value).replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:limit]


def _commit(value: object) -> str | None:
    """A commit hash for the indexed column (a git SHA-1 or SHA-256 in hex), else None."""
    text = str(value).lower() if isinstance(value, str) else ""
    return text if 4 <= len(text) <= 64 and all(c in "0123456789abcdef" for c in text) else None


def _record_row(record: Record, run_id: str, machine_id: str, commit: str | None = None) -> dict[str, Any]:
    doc = record.to_dict()
    body = {k: v for k, v in doc.items() if k not in ("id", "created", "derived")}
    # A record's id may be up to 200 characters of anything (an imported one): the row's key is
    # then its digest; the record read back keeps its own id from its JSON.
    key = (
        record.id
        if len(record.id) <= 64 and record.id.isascii() and record.id.isprintable()
        else hashlib.sha256(record.id.encode("utf-8", "backslashreplace")).hexdigest()
    )
    dirty = record.env.get("git_dirty")
    return {
        "id": key,
        "digest": hashlib.sha256(canonical(body).encode()).hexdigest(),
        "run_id": run_id,
        "machine_id": machine_id,
        "workload": column_text(record.workload, 255),
        "params": canonical(record.params),
        "device": column_text(record.device, 64),
        "commit": _commit(commit or record.env.get("git_commit")),
        "dirty": None if commit or not isinstance(dirty, bool) else dirty,
        "created": record.created,
        "median_s": record.median_s,
        "doc": canonical(doc),
    }


class Store:
    """One open store (perfsuite.database.open_store)."""

    def __init__(self, location: Location, engine: sa.Engine | None = None, create: bool = True) -> None:
        """`create=False`: a reader's store, which must exist already (a query never makes one)."""
        self.location = location
        if not create and location.path is not None and not location.path.exists():
            raise StoreError(
                f"store {location.shown}: no store there yet (nothing has been stored; "
                f"it is chosen by {location.source})"
            )
        self.engine = engine if engine is not None else open_engine(location, create=create)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ---------------------------------------------------------------------------
    def _write(self) -> _Writing:
        return _Writing(self)

    def _insert_absent(self, conn: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert the rows whose keys are not there yet; returns how many were new."""
        if not rows:
            return 0
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]  # the same API, SQLite's
        # RETURNING counts what was new on both engines (an executemany's rowcount is -1 on psycopg).
        result = conn.execute(insert(table).on_conflict_do_nothing().returning(table.c.id), rows)
        return len(result.all())

    def add_machine(self, machine: Machine) -> None:
        with self._write() as conn:
            self._insert_absent(conn, schema.machines, [machine.row()])

    def begin_run(self, run: Mapping[str, Any], machine: Machine) -> None:
        with self._write() as conn:
            self._insert_absent(conn, schema.machines, [machine.row()])
            self._insert_absent(conn, schema.runs, [run])

    def set_batch(self, run_id: str, batch: str, shard: int, shards: int) -> None:
        with self._write() as conn:
            conn.execute(
                schema.runs.update().where(schema.runs.c.id == run_id).values(batch=batch, shard=shard, shards=shards)
            )

    def finish_run(self, run_id: str, state: str) -> None:
        with self._write() as conn:
            conn.execute(schema.runs.update().where(schema.runs.c.id == run_id).values(state=state, finished=now()))

    def add_records(self, run_id: str, machine_id: str, records: Iterable[Record], commit: str | None = None) -> int:
        """Store `records` of one run in one transaction; returns how many were new. `commit`: the
        commit measured when the records' own git fields describe another checkout (asv's builds)."""
        rows = [_record_row(r, run_id, machine_id, commit) for r in records]
        with self._write() as conn:
            # Absent by id AND by content: the digest is unique too, so a second insert of one
            # measurement under another id (an import of a copy) is skipped by the conflict.
            return self._insert_absent(conn, schema.records, rows)

    def add_documents(
        self,
        run_id: str,
        machine_id: str,
        kind: str,
        entries: Iterable[Mapping[str, Any]],
        workload: str | None = None,
        commit: str | None = None,
    ) -> int:
        rows: list[dict[str, Any]] = []
        for entry in entries:
            name = workload or entry.get("workload") or entry.get("name")
            created = entry.get("created")
            rows.append(
                {
                    "id": document_digest(kind, entry),
                    "run_id": run_id,
                    "machine_id": machine_id,
                    "kind": kind[:32],
                    "workload": None if name is None else column_text(name, 255),
                    "commit": _commit(commit),
                    "created": column_text(created, 40) if created else now(),
                    "doc": canonical(entry),
                }
            )
        with self._write() as conn:
            return self._insert_absent(conn, schema.documents, rows)

    def copy_run(self, other: Store, run_id: str) -> tuple[int, int]:
        """Copy one run of `other` (a spool) here, with its machine, records and documents, in one
        transaction; returns (records, documents) that were new."""
        with other.engine.connect() as src:
            run = src.execute(sa.select(schema.runs).where(schema.runs.c.id == run_id)).mappings().one()
            machine = list(
                src.execute(sa.select(schema.machines).where(schema.machines.c.id == run["machine_id"]))
                .mappings()
                .all()
            )
            recs = src.execute(sa.select(schema.records).where(schema.records.c.run_id == run_id)).mappings().all()
            docs = src.execute(sa.select(schema.documents).where(schema.documents.c.run_id == run_id)).mappings().all()
        machine_ids = {r["machine_id"] for r in (*recs, *docs)} - {run["machine_id"]}
        if machine_ids:
            with other.engine.connect() as src:
                machine += (
                    src.execute(sa.select(schema.machines).where(schema.machines.c.id.in_(machine_ids)))
                    .mappings()
                    .all()
                )
        with self._write() as conn:
            self._insert_absent(conn, schema.machines, [dict(m) for m in machine])
            self._insert_absent(conn, schema.runs, [dict(run)])
            # A run pushed while it was still running in the spool is finished here too.
            conn.execute(
                schema.runs.update()
                .where(schema.runs.c.id == run_id)
                .values(state=run["state"], finished=run["finished"])
            )
            n_recs = self._insert_absent(conn, schema.records, [dict(r) for r in recs])
            n_docs = self._insert_absent(conn, schema.documents, [dict(d) for d in docs])
        return n_recs, n_docs

    def delete_run(self, run_id: str) -> None:
        with self._write() as conn:
            for table in (schema.records, schema.documents):
                conn.execute(table.delete().where(table.c.run_id == run_id))
            conn.execute(schema.runs.delete().where(schema.runs.c.id == run_id))

    # ---- reading ---------------------------------------------------------------------------
    def _read(self, query: sa.Executable) -> Sequence[sa.RowMapping]:
        try:
            with self.engine.connect() as conn:
                return conn.execute(query).mappings().all()
        except sa.exc.DBAPIError as exc:
            raise describe_failure(self.location, exc) from None

    def _record_query(
        self,
        columns: Iterable[sa.ColumnElement[Any]],
        *,
        workload: str | Iterable[str] | None = None,
        device: str | None = None,
        machine: str | Iterable[str] | None = None,
        commits: Iterable[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        run: str | None = None,
        batch: str | None = None,
        commit_prefix: str | None = None,
    ) -> sa.Select[Any]:
        r = schema.records
        q = sa.select(*columns)
        if workload is not None:
            q = q.where(r.c.workload.in_([workload] if isinstance(workload, str) else list(workload)))
        if device is not None:
            q = q.where(r.c.device == device)
        if machine is not None:
            q = q.where(r.c.machine_id.in_([machine] if isinstance(machine, str) else list(machine)))
        if commits is not None:
            q = q.where(r.c.commit.in_(list(commits)))
        if commit_prefix is not None:  # hex only (perfsuite.database.select): no LIKE wildcard can hide in it
            q = q.where(r.c.commit.startswith(commit_prefix, autoescape=True))
        if since is not None:
            q = q.where(r.c.created >= since)
        if until is not None:
            q = q.where(r.c.created < until)
        if run is not None:
            q = q.where(r.c.run_id == run)
        if batch is not None:  # a batch id or its first characters, as `store runs` shows them
            q = q.where(
                r.c.run_id.in_(
                    sa.select(schema.runs.c.id).where(schema.runs.c.batch.startswith(batch, autoescape=True))
                )
            )
        # `params` (a subset every row must match) is matched by the callers, on the rows the
        # indexed filters leave.
        return q.order_by(r.c.created, r.c.id)

    def rows(self, params: Mapping[str, Any] | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Stored records' columns, without decoding their documents: the fast query (a month of a
        team's nightly suites in well under a second). `params`: a subset every row must match."""
        r = schema.records
        cols = [
            r.c.id,
            r.c.run_id,
            r.c.machine_id,
            r.c.workload,
            r.c.params,
            r.c.device,
            r.c.commit,
            r.c.dirty,
            r.c.created,
            r.c.median_s,
        ]
        out = []
        for row in self._read(self._record_query(cols, **filters)):
            d = dict(row)
            d["params"] = json.loads(d["params"])
            if params and any(d["params"].get(k) != v for k, v in params.items()):
                continue
            out.append(d)
        return out

    def records(self, params: Mapping[str, Any] | None = None, **filters: Any) -> list[Record]:
        """The stored records themselves, validated as any file's are."""
        r = schema.records
        out = []
        for row in self._read(self._record_query([r.c.id, r.c.params, r.c.doc], **filters)):
            if params and any(json.loads(row["params"]).get(k) != v for k, v in params.items()):
                continue
            try:
                out.append(Record.from_dict(json.loads(row["doc"])))
            except RecordError as exc:
                raise RecordError(f"store {self.location.shown}: record {row['id']}: {exc}") from None
        return out

    def documents(
        self,
        kind: str | None = None,
        workload: str | None = None,
        machine: str | None = None,
        since: str | None = None,
        run: str | None = None,
    ) -> list[dict[str, Any]]:
        d = schema.documents
        q = sa.select(d.c.kind, d.c.run_id, d.c.machine_id, d.c.workload, d.c.created, d.c.doc)
        for col, value in ((d.c.kind, kind), (d.c.workload, workload), (d.c.machine_id, machine), (d.c.run_id, run)):
            if value is not None:
                q = q.where(col == value)
        if since is not None:
            q = q.where(d.c.created >= since)
        return [{**dict(row), "doc": json.loads(row["doc"])} for row in self._read(q.order_by(d.c.created, d.c.id))]

    def runs(
        self, kind: str | None = None, machine: str | None = None, batch: str | None = None, state: str | None = None
    ) -> list[dict[str, Any]]:
        r = schema.runs
        n = (
            sa.select(sa.func.count())
            .select_from(schema.records)
            .where(schema.records.c.run_id == r.c.id)
            .scalar_subquery()
        )
        # A gate's, bisection's or history's results are documents, not records (issue 50: their
        # runs listed "records 0"): both counted.
        d = (
            sa.select(sa.func.count())
            .select_from(schema.documents)
            .where(schema.documents.c.run_id == r.c.id)
            .scalar_subquery()
        )
        q = sa.select(r, n.label("records"), d.label("documents"))
        for col, value in ((r.c.kind, kind), (r.c.machine_id, machine), (r.c.state, state)):
            if value is not None:
                q = q.where(col == value)
        if batch is not None:  # an id or its first characters
            q = q.where(r.c.batch.startswith(batch, autoescape=True))
        return [dict(row) for row in self._read(q.order_by(r.c.started, r.c.id))]

    def machines(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self._read(sa.select(schema.machines).order_by(schema.machines.c.first_seen))]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, table in (
            ("machines", schema.machines),
            ("runs", schema.runs),
            ("records", schema.records),
            ("documents", schema.documents),
        ):
            out[name] = self._read(sa.select(sa.func.count().label("n")).select_from(table))[0]["n"]
        return out


class _Writing:
    """A write transaction; a database error becomes a StoreError (StoreUnreachable when the
    server went away), raised after the transaction rolled back."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> sa.Connection:
        self.conn: sa.Connection | None = None
        try:
            self.conn = self.store.engine.connect().execution_options(**WRITE)
            self.tx = self.conn.begin()
        except sa.exc.DBAPIError as exc:
            if self.conn is not None:
                self.conn.close()
            raise describe_failure(self.store.location, exc) from None
        return self.conn

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        assert self.conn is not None  # __enter__ opened it (or raised, and then this is not called)
        try:
            if exc_type is None:
                self.tx.commit()
            else:
                self.tx.rollback()
        except sa.exc.DBAPIError as failure:
            raise describe_failure(self.store.location, failure) from None
        finally:
            self.conn.close()
        if isinstance(exc, (sa.exc.StatementError, UnicodeError)):  # a value a column refused, too
            raise describe_failure(self.store.location, exc) from None
        return False


def open_store(location: Location) -> Store:
    """The store at `location`, migrated (StoreError when it cannot be used)."""
    return Store(location)
