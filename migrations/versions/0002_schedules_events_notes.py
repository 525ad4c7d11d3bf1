"""campaign notes, recalibration schedules and events

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 05:49:58
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# JSONB on PostgreSQL, JSON text elsewhere (as models.base.JSONType).
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TS = sa.DateTime(timezone=True)

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "recalibration_schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topology_id", sa.Integer(), nullable=False),
        sa.Column("cron", sa.String(length=120), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("parameters", JSON, nullable=False),
        sa.Column("last_run_at", TS, nullable=True),
        sa.Column("last_campaign_id", sa.Integer(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["topology_id"], ["topologies.id"],
            name=op.f("fk_recalibration_schedules_topology_id_topologies"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recalibration_schedules")),
        sa.UniqueConstraint("topology_id", name=op.f("uq_recalibration_schedules_topology_id")),
    )
    op.create_table(
        "recalibration_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topology_id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("previous_campaign_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("before", JSON, nullable=True),
        sa.Column("after", JSON, nullable=True),
        sa.Column("change_pct", sa.Float(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.CheckConstraint(
            "kind IN ('opm_changed', 'occ_changed', 'obs_moved', 'omega_sign_changed')",
            name=op.f("ck_recalibration_events_kind"),
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"],
            name=op.f("fk_recalibration_events_campaign_id_campaigns"), ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["topology_id"], ["topologies.id"],
            name=op.f("fk_recalibration_events_topology_id_topologies"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recalibration_events")),
    )
    op.create_index(
        op.f("ix_recalibration_events_topology_id"), "recalibration_events", ["topology_id"]
    )
    # Existing campaigns get {}; new rows always set it (models default).
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("notes", JSON, nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("notes")
    op.drop_index(op.f("ix_recalibration_events_topology_id"), table_name="recalibration_events")
    op.drop_table("recalibration_events")
    op.drop_table("recalibration_schedules")
