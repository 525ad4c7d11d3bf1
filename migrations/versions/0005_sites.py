"""site locks: one row per site, held by a probe lease until a timestamp

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "site_locks",
        sa.Column("site", sa.String(32), nullable=False),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("site", name=op.f("pk_site_locks")),
    )


def downgrade() -> None:
    op.drop_table("site_locks")
