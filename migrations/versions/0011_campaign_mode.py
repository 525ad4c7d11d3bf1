"""campaign mode: the exhaustive grid or adaptive calibration

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 07:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("mode", sa.String(16), nullable=False, server_default="grid"))
        batch.create_check_constraint("mode", "mode IN ('grid', 'adaptive')")


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_constraint(op.f("ck_campaigns_mode"), type_="check")
        batch.drop_column("mode")
