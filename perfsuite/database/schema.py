"""The store's tables (SQLAlchemy Core). Changing them means a new Alembic revision in
migrations/versions: this module describes head, the migrations describe how a store gets there.

Rows hold the full result as strict JSON text (`doc`) beside the columns queries filter and sort
on, so a query reads indexed columns and only the rows it returns are decoded. JSON is TEXT on both
engines: one schema, byte-for-byte the same documents on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

# One machine that reported: a stable id (perfsuite.database.machine), its host name and the
# fingerprint of what makes its times comparable (perfsuite.measuring.fingerprint.comparable).
machines = sa.Table(
    "machines",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("info", sa.Text, nullable=False),
    sa.Column("first_seen", sa.String(40), nullable=False),
)

# One command that measured (run, suite, pair, amp, gate, bisect, why, asv, pytest) or one import.
# `batch` joins the shards of one suite run made on several machines (perfsuite.database.shards).
runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("machine_id", sa.String(64), sa.ForeignKey("machines.id"), nullable=False),
    sa.Column("commit", sa.String(64)),
    sa.Column("dirty", sa.Boolean),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("started", sa.String(40), nullable=False),
    sa.Column("finished", sa.String(40)),
    sa.Column("state", sa.String(16), nullable=False),  # running, finished, failed, interrupted
    sa.Column("batch", sa.String(64)),
    sa.Column("shard", sa.Integer),
    sa.Column("shards", sa.Integer),
)

# One measured case (perfsuite.core.record.Record, its to_dict() in `doc`). `digest` is the
# record's content without its id and creation time: importing the same measurement twice adds
# nothing, whatever file it came from.
records = sa.Table(
    "records",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False, unique=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("machine_id", sa.String(64), sa.ForeignKey("machines.id"), nullable=False),
    sa.Column("workload", sa.String(255), nullable=False),
    sa.Column("params", sa.Text, nullable=False),  # canonical JSON: sorted keys, no spaces
    sa.Column("device", sa.String(64), nullable=False),
    sa.Column("commit", sa.String(64)),
    sa.Column("dirty", sa.Boolean),
    sa.Column("created", sa.String(40), nullable=False),
    sa.Column("median_s", sa.Float, nullable=False),
    sa.Column("doc", sa.Text, nullable=False),
)
sa.Index("records_by_case", records.c.workload, records.c.machine_id, records.c.created)
sa.Index("records_by_commit", records.c.commit)
sa.Index("records_by_run", records.c.run_id)

# Every other result: a pair, amp, gate, bisect, why or history entry, as its document holds it.
documents = sa.Table(
    "documents",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),  # the digest of (kind, doc)
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("machine_id", sa.String(64), sa.ForeignKey("machines.id"), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("workload", sa.String(255)),
    sa.Column("commit", sa.String(64)),
    sa.Column("created", sa.String(40), nullable=False),
    sa.Column("doc", sa.Text, nullable=False),
)
sa.Index("documents_by_kind", documents.c.kind, documents.c.workload, documents.c.created)
