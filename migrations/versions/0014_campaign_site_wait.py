"""campaigns.site_wait_at: when a campaign last asked for its sites and had to wait (the
fleet policy gives the busiest site's campaign the sites first, but only to a campaign whose
executor is really asking for them)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("site_wait_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("site_wait_at")
