"""probe tools as plug-ins: a campaign's probe_tool is checked by the plan against the registry
of tools (no CHECK: a registered tool needs no migration), and the paced tool has one name

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the tools the CHECK this revision drops allowed
CHECKED = ("auto", "netperfmeter", "iperf3")
campaigns = sa.table("campaigns", sa.column("probe_tool", sa.String))
measurements = sa.table("measurements", sa.column("tool", sa.String))


def upgrade() -> None:
    # batch mode: SQLite drops a CHECK constraint by recreating the table
    with op.batch_alter_table("campaigns", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_campaigns_probe_tool"), type_="check")
    op.execute(measurements.update().where(measurements.c.tool == "mpcoa-paced")
               .values(tool="paced"))


def downgrade() -> None:
    # a campaign on a tool the older schema does not know keeps its row, asked as auto
    op.execute(campaigns.update().where(campaigns.c.probe_tool.not_in(CHECKED))
               .values(probe_tool="auto"))
    op.execute(measurements.update().where(measurements.c.tool == "paced")
               .values(tool="mpcoa-paced"))
    with op.batch_alter_table("campaigns", recreate="auto") as batch:
        batch.create_check_constraint(
            "probe_tool", "probe_tool IN (" + ", ".join(f"'{t}'" for t in CHECKED) + ")")
