"""probe sessions: the passive and active halves of a two-sided probe meet here

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 07:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "probe_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.String(64), nullable=False),
        sa.Column("step_key", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("port", sa.Integer(), nullable=True),
        sa.Column("receiver_addrs", JSON, nullable=False),
        sa.Column("receiver_report", JSON, nullable=False),
        sa.Column("server_pid", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"], ondelete="CASCADE",
                                name=op.f("fk_probe_sessions_campaign_id_campaigns")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_probe_sessions")),
        sa.UniqueConstraint("campaign_id", "lease_id", "step_key",
                            name=op.f("uq_probe_sessions_campaign_id_lease_id_step_key")),
    )
    op.create_index(op.f("ix_probe_sessions_campaign_id"), "probe_sessions", ["campaign_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_probe_sessions_campaign_id"), table_name="probe_sessions")
    op.drop_table("probe_sessions")
