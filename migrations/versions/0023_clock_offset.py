"""clock offset: a stream probe's estimated clock offset between its two hosts and its
uncertainty

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27 15:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.add_column(sa.Column("clock_offset_ms", sa.Float(), nullable=True))
        batch.add_column(sa.Column("clock_offset_uncertainty_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.drop_column("clock_offset_uncertainty_ms")
        batch.drop_column("clock_offset_ms")
