"""objective: what a campaign optimises, bulk goodput (every earlier campaign) or a stream

`objective` keeps the stream as asked (NULL: bulk); `objective_key` the resolved stream
("bulk", or "stream:25Hz:40000B:budget=150:loss=0.01"), by which answers are looked up so that
answers for different objectives never mix.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# JSONB on PostgreSQL, JSON text elsewhere (as models.base.JSONType).
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("objective", JSON, nullable=True))
        batch.add_column(sa.Column("objective_key", sa.String(120), nullable=False,
                                   server_default="bulk"))
        batch.create_index(op.f("ix_campaigns_objective_key"), ["objective_key"])


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_index(op.f("ix_campaigns_objective_key"))
        batch.drop_column("objective_key")
        batch.drop_column("objective")
