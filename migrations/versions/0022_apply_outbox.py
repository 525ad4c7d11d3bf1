"""apply outbox: what is in flight on an applied answer, its hand-over and its deadline

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("applied_answers") as batch:
        batch.add_column(sa.Column("action", sa.String(16), nullable=True))
        batch.add_column(sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("runner", JSON, nullable=True))
    # an action in flight when this runs: the sweeper gives it its deadline from its last change
    op.execute("UPDATE applied_answers SET action = 'apply' WHERE state = 'applying'")
    op.execute("UPDATE applied_answers SET action = 'rollback' WHERE state = 'rolling_back'")


def downgrade() -> None:
    with op.batch_alter_table("applied_answers") as batch:
        for name in ("runner", "deadline_at", "dispatched_at", "action"):
            batch.drop_column(name)
