"""scheduler lease: the one API process per database that runs due schedules

Revision ID: 0009
Revises: 0005
Create Date: 2026-11-23 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scheduler_lease",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scheduler_lease")),
    )


def downgrade() -> None:
    op.drop_table("scheduler_lease")
