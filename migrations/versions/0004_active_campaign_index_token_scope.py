"""one active campaign per topology (partial unique index); API tokens get a scope and an expiry

Before the index is built, the extra active campaigns of a topology (all but its oldest queued or
running one, which a check-then-insert race could leave) are cancelled with a note in `error`.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIVE_WHERE = "state IN ('queued', 'running')"
INDEX = "uq_campaigns_active_topology"

campaigns = sa.table(
    "campaigns",
    sa.column("id", sa.Integer),
    sa.column("topology_id", sa.Integer),
    sa.column("state", sa.String),
    sa.column("error", sa.Text),
)


def _cancel_extra_active_campaigns() -> None:
    conn = op.get_bind()
    active = campaigns.c.state.in_(("queued", "running"))
    rows = conn.execute(
        sa.select(campaigns.c.id, campaigns.c.topology_id).where(active).order_by(campaigns.c.id)
    ).all()
    seen: set[int] = set()
    for row in rows:
        if row.topology_id in seen:
            conn.execute(
                campaigns.update()
                .where(campaigns.c.id == row.id)
                .values(state="cancelled", error="migration 0004: another campaign was active")
            )
        seen.add(row.topology_id)


def upgrade() -> None:
    _cancel_extra_active_campaigns()
    op.create_index(
        INDEX,
        "campaigns",
        ["topology_id"],
        unique=True,
        postgresql_where=sa.text(ACTIVE_WHERE),
        sqlite_where=sa.text(ACTIVE_WHERE),
    )
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(
            sa.Column("scope", sa.String(length=8), nullable=False, server_default="write")
        )
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("scope")
    op.drop_index(INDEX, table_name="campaigns")
