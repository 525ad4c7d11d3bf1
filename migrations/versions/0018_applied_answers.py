"""applied answers: an answer set on a topology's sites, its confirmation and failover events

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-24 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
STATES = ("applying", "applied", "unconfirmed", "rolled_back", "failed")


def upgrade() -> None:
    op.create_table(
        "applied_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topology_id", sa.Integer(), nullable=False),
        sa.Column("recommendation_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("plan", JSON, nullable=False),
        sa.Column("sites", JSON, nullable=False),
        sa.Column("confirmation", JSON, nullable=True),
        sa.Column("events", JSON, nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["topology_id"], ["topologies.id"], ondelete="CASCADE",
                                name=op.f("fk_applied_answers_topology_id_topologies")),
        sa.ForeignKeyConstraint(["recommendation_id"], ["recommendations.id"],
                                ondelete="SET NULL",
                                name=op.f("fk_applied_answers_recommendation_id_recommendations")),
        sa.CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in STATES) + ")",
                           name=op.f("ck_applied_answers_state")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_applied_answers")),
    )
    op.create_index(op.f("ix_applied_answers_topology_id"), "applied_answers", ["topology_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_applied_answers_topology_id"), table_name="applied_answers")
    op.drop_table("applied_answers")
