"""isp address: a site's address on an ISP, IPv4 or IPv6 (optional)

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("isps") as batch:
        # 45 characters: the longest IPv6 text form (an IPv4-mapped tail), as the API stores it
        batch.add_column(sa.Column("address", sa.String(45), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # SQLite drops a column in place since 3.35; a batch would recreate the table, and
        # dropping the old one fails while other tables' foreign keys point at it
        op.execute("ALTER TABLE isps DROP COLUMN address")
    else:
        op.drop_column("isps", "address")
