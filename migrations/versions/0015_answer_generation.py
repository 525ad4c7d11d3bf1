"""answer_generation: one counter that grows whenever something an answer depends on changes, so
that every API process can keep answers cached and still never serve a stale one

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "answer_generation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answer_generation")),
    )
    op.bulk_insert(table, [{"id": 1, "value": 0}])


def downgrade() -> None:
    op.drop_table("answer_generation")
