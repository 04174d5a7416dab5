"""The first store: machines, runs and their records.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "machines",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("info", sa.Text, nullable=False),
        sa.Column("first_seen", sa.String(40), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("machine_id", sa.String(64), sa.ForeignKey("machines.id"), nullable=False),
        sa.Column("commit", sa.String(64)),
        sa.Column("dirty", sa.Boolean),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("started", sa.String(40), nullable=False),
        sa.Column("finished", sa.String(40)),
        sa.Column("state", sa.String(16), nullable=False),
    )
    op.create_table(
        "records",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("machine_id", sa.String(64), sa.ForeignKey("machines.id"), nullable=False),
        sa.Column("workload", sa.String(255), nullable=False),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("device", sa.String(64), nullable=False),
        sa.Column("commit", sa.String(64)),
        sa.Column("dirty", sa.Boolean),
        sa.Column("created", sa.String(40), nullable=False),
        sa.Column("median_s", sa.Float, nullable=False),
        sa.Column("doc", sa.Text, nullable=False),
    )
    op.create_index("records_by_case", "records", ["workload", "machine_id", "created"])
    op.create_index("records_by_commit", "records", ["commit"])
    op.create_index("records_by_run", "records", ["run_id"])


def downgrade() -> None:
    op.drop_table("records")
    op.drop_table("runs")
    op.drop_table("machines")
