"""campaign probe tool: the tool every phase's probes run on (auto | netperfmeter | iperf3)

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # batch mode: SQLite adds a CHECK constraint by recreating the table
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("probe_tool", sa.String(16), nullable=False,
                                   server_default="auto"))
        batch.create_check_constraint(
            "probe_tool", "probe_tool IN ('auto', 'netperfmeter', 'iperf3')")


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_constraint(op.f("ck_campaigns_probe_tool"), type_="check")
        batch.drop_column("probe_tool")
