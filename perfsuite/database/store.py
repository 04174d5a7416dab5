"""Store: write machines, runs, records and documents; query them. The one interface every road
and reader uses, the same on SQLite and PostgreSQL.

Every write is one transaction and inserts only what is absent (a record by its content, its
digest, whatever its id; a document by its digest; a run or machine by its id), so writes can be
retried, imported twice and pushed from a spool without duplicating anything, and a writer killed
mid-way leaves either the whole row or nothing. A record whose id is already stored for another
measurement is a measurement too: kept, under its digest (its JSON keeps its own id).

A row is read back as a file is, and one that is not what perfsuite writes (JSON that does not
parse, a median that is not a number: a hand-edited or damaged store) is a RecordError naming it,
never a crash; a spool's rows are rebuilt from their validated records before they are pushed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
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


def _decoded(what: str, text: object) -> Any:
    """A JSON column of a stored row; RecordError, saying `what` it is, when it does not parse."""
    try:
        return json.loads(text)  # type: ignore[arg-type]  # a damaged row may hold any type: TypeError
    except (TypeError, ValueError, RecursionError):
        shown = repr(text)[:40]
        raise RecordError(f"{what}: not JSON ({shown}), the row is damaged") from None


def _record_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """A record's row with its params decoded; a column of another type than perfsuite writes (a
    hand-edited or damaged row: SQLite keeps any type in any column) is a RecordError."""
    params = _decoded("its params", row["params"])
    if not isinstance(params, dict):
        raise RecordError(f"its params are {type(params).__name__}, not an object")
    median = row["median_s"]
    if isinstance(median, bool) or not isinstance(median, (int, float)):
        raise RecordError(f"its median_s is {repr(median)[:40]}, not a number")
    for column in ("workload", "device", "created", "machine_id"):
        if not isinstance(row[column], str):
            raise RecordError(f"its {column} is {repr(row[column])[:40]}, not text")
    if row["commit"] is not None and not isinstance(row["commit"], str):
        raise RecordError(f"its commit is {repr(row['commit'])[:40]}, not text")
    return {**row, "params": params}


def _spool_record_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A spool's record row as the store takes it: its columns readable (_record_columns), its
    record read and validated as `store import` reads a file's (RecordError otherwise), and the
    row rebuilt from that record, so that no damaged or hand-edited row reaches a team's store.
    The commit column stays the spool's where it is not the record's own (asv's builds)."""
    _record_columns(row)
    doc = _decoded("its doc", row["doc"])
    record = Record.from_dict(doc)
    own = _commit(record.env.get("git_commit"))
    given = row["commit"] if isinstance(row["commit"], str) and _commit(row["commit"]) != own else None
    return _record_row(record, row["run_id"], row["machine_id"], given)


def _spool_document_row(row: Mapping[str, Any]) -> dict[str, Any]:
    doc = _decoded("its doc", row["doc"])
    if not isinstance(doc, dict):
        raise RecordError(f"its doc is {type(doc).__name__}, not an object")
    return {**row, "doc": canonical(doc)}


@dataclass(frozen=True)
class RunRows:
    """One run of a spool as its rows: the run's, its machines', its records' and documents'."""

    run: dict[str, Any]
    machines: list[dict[str, Any]]
    records: list[dict[str, Any]]
    documents: list[dict[str, Any]]

    def validated(self) -> RunRows:
        """The same run with every record and document read as a file's would be: RecordError
        naming the first that is not one."""
        records, documents = [], []
        for row in self.records:
            try:
                records.append(_spool_record_row(row))
            except RecordError as exc:
                raise RecordError(f"record {str(row['id'])[:64]}: {exc}") from None
        for row in self.documents:
            try:
                documents.append(_spool_document_row(row))
            except RecordError as exc:
                raise RecordError(f"document {str(row['id'])[:64]}: {exc}") from None
        return replace(self, records=records, documents=documents)


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
        # Records written whose id was already stored for another measurement (kept under their digest).
        self.id_clashes = 0

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
        return len(self._inserted(conn, table, rows))

    def _inserted(self, conn: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """Insert the rows whose keys are not there yet; returns the ids of those that were new."""
        if not rows:
            return set()
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]  # the same API, SQLite's
        # RETURNING counts what was new on both engines (an executemany's rowcount is -1 on psycopg).
        result = conn.execute(insert(table).on_conflict_do_nothing().returning(table.c.id), rows)
        return {row[0] for row in result}

    def _insert_records(self, conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert the records whose content is not stored yet; returns how many were new. A record
        whose id is taken by another measurement (another digest) is stored under its digest."""
        new = self._inserted(conn, schema.records, rows)
        left = [r for r in rows if r["id"] not in new]
        if not left:
            return len(new)
        # Read after the insert: on PostgreSQL a concurrent writer's row is visible once the
        # insert has waited for it.
        r = schema.records
        stored = {
            row[0] for row in conn.execute(sa.select(r.c.digest).where(r.c.digest.in_([x["digest"] for x in left])))
        }
        unmatched = [x for x in left if x["digest"] not in stored]
        # The stored row's digest was taken by the perfsuite that wrote it: a newer one (another
        # schema version, new defaulted fields) digests the same measurement differently. Each
        # stored row under a clashing id is digested again with today's code before it is called
        # another measurement (an ordinary re-import after an upgrade would store every record twice).
        same = self._same_measurement(conn, unmatched)
        clashes = [{**x, "id": x["digest"]} for x in unmatched if x["id"] not in same]
        clashes = list({x["id"]: x for x in clashes}.values())  # one measurement twice in `rows`: once
        moved = self._inserted(conn, schema.records, clashes)
        self.id_clashes += len(moved)
        return len(new) + len(moved)

    def _same_measurement(self, conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """The ids among `rows` whose stored record, digested again today, is the row's measurement."""
        if not rows:
            return set()
        r = schema.records
        wanted = {x["id"]: x["digest"] for x in rows}
        same = set()
        for rid, doc in conn.execute(sa.select(r.c.id, r.c.doc).where(r.c.id.in_(list(wanted)))):
            try:
                again = record_digest(Record.from_dict(_decoded("its doc", doc)))
            except (ValueError, TypeError, RecordError):  # a stored row that is not a record: not the same
                continue
            if again == wanted[rid]:
                same.add(rid)
        return same

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
            # Absent by content: a second insert of one measurement under another id (an import of
            # a copy) is skipped; another measurement under a stored id is kept under its digest.
            return self._insert_records(conn, rows)

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

    def read_run(self, run_id: str) -> RunRows:
        """One run of this store (a spool) as rows, with its machines, records and documents; a
        file that cannot be read is a StoreError."""
        r, m, rec, doc = schema.runs, schema.machines, schema.records, schema.documents
        try:
            with self.engine.connect() as src:
                run = dict(src.execute(sa.select(r).where(r.c.id == run_id)).mappings().one())
                recs = [dict(x) for x in src.execute(sa.select(rec).where(rec.c.run_id == run_id)).mappings()]
                docs = [dict(x) for x in src.execute(sa.select(doc).where(doc.c.run_id == run_id)).mappings()]
                ids = {run["machine_id"]} | {x["machine_id"] for x in (*recs, *docs)}
                machines = [dict(x) for x in src.execute(sa.select(m).where(m.c.id.in_(ids))).mappings()]
        except sa.exc.DBAPIError as exc:
            raise describe_failure(self.location, exc) from None
        return RunRows(run, machines, recs, docs)

    def add_run(self, rows: RunRows) -> tuple[int, int]:
        """A run read from a spool (read_run, then validated), stored in one transaction; returns
        (records, documents) that were new."""
        run = rows.run
        with self._write() as conn:
            self._insert_absent(conn, schema.machines, rows.machines)
            self._insert_absent(conn, schema.runs, [run])
            # A run pushed while it was still running in the spool is finished here too.
            conn.execute(
                schema.runs.update()
                .where(schema.runs.c.id == run["id"])
                .values(state=run["state"], finished=run["finished"])
            )
            n_recs = self._insert_records(conn, rows.records)
            n_docs = self._insert_absent(conn, schema.documents, rows.documents)
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
            d = self._checked(dict(row))
            if params and any(d["params"].get(k) != v for k, v in params.items()):
                continue
            out.append(d)
        return out

    def _checked(self, row: dict[str, Any]) -> dict[str, Any]:
        """A record's columns as rows() returns them, its params decoded; RecordError naming it."""
        try:
            return _record_columns(row)
        except RecordError as exc:
            raise self._damaged("record", row["id"], exc) from None

    def _damaged(self, what: str, key: object, exc: RecordError) -> RecordError:
        return RecordError(
            f"store {self.location.shown}: {what} {str(key)[:64]}: {exc} (delete the row, or rebuild "
            "the store from JSON results with `perfsuite store import`)"
        )

    def records(self, params: Mapping[str, Any] | None = None, **filters: Any) -> list[Record]:
        """The stored records themselves, validated as any file's are."""
        r = schema.records
        out = []
        for row in self._read(self._record_query([r.c.id, r.c.params, r.c.doc], **filters)):
            try:
                if params:
                    given = _decoded("its params", row["params"])
                    if not isinstance(given, dict):
                        raise RecordError(f"its params are {type(given).__name__}, not an object")
                    if any(given.get(k) != v for k, v in params.items()):
                        continue
                out.append(Record.from_dict(_decoded("its doc", row["doc"])))
            except RecordError as exc:
                raise self._damaged("record", row["id"], exc) from None
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
        q = sa.select(d.c.id, d.c.kind, d.c.run_id, d.c.machine_id, d.c.workload, d.c.created, d.c.doc)
        for col, value in ((d.c.kind, kind), (d.c.workload, workload), (d.c.machine_id, machine), (d.c.run_id, run)):
            if value is not None:
                q = q.where(col == value)
        if since is not None:
            q = q.where(d.c.created >= since)
        out = []
        for row in self._read(q.order_by(d.c.created, d.c.id)):
            entry = dict(row)
            key = entry.pop("id")
            try:
                entry["doc"] = _decoded("its doc", entry["doc"])
            except RecordError as exc:
                raise self._damaged("document", key, exc) from None
            out.append(entry)
        return out

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
