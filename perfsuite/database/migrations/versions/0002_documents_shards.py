"""Documents beside records (pair, amp, gate, bisect, why, history), and shards of one suite run
made on several machines (runs.batch, shard, shards).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("machine_id", sa.String(64), sa.ForeignKey("machines.id"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("workload", sa.String(255)),
        sa.Column("commit", sa.String(64)),
        sa.Column("created", sa.String(40), nullable=False),
        sa.Column("doc", sa.Text, nullable=False),
    )
    op.create_index("documents_by_kind", "documents", ["kind", "workload", "created"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("batch", sa.String(64)))
        batch.add_column(sa.Column("shard", sa.Integer))
        batch.add_column(sa.Column("shards", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("shards")
        batch.drop_column("shard")
        batch.drop_column("batch")
    op.drop_table("documents")
