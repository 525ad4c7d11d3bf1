"""subflow selection: a "selection" measurement phase whose key names the probed subset, and the
timing rule's inputs stored with every probe

A selection probe measures one subset of the subflows; its key's `excluded_subflow` column holds
the subset ("only:" and the names joined by "+"), which needs more than the 20 characters of one
subflow's name. `timing` keeps the warm-up and duration a probe ran with and why.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_PHASES = ("impact", "buffer", "warm")
NEW_PHASES = (*OLD_PHASES, "selection")
# JSONB on PostgreSQL, JSON text elsewhere (as models.base.JSONType).
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    # batch mode: SQLite cannot alter a CHECK constraint or a column type in place
    with op.batch_alter_table("measurements", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_measurements_phase"), type_="check")
        batch.create_check_constraint("phase", _in("phase", NEW_PHASES))
        batch.alter_column("excluded_subflow", type_=sa.String(200),
                           existing_type=sa.String(20), existing_nullable=False)
        batch.add_column(sa.Column("timing", JSON, nullable=True))


def downgrade() -> None:
    op.execute("DELETE FROM measurements WHERE phase = 'selection'")
    with op.batch_alter_table("measurements", recreate="auto") as batch:
        batch.drop_column("timing")
        batch.alter_column("excluded_subflow", type_=sa.String(20),
                           existing_type=sa.String(200), existing_nullable=False)
        batch.drop_constraint(op.f("ck_measurements_phase"), type_="check")
        batch.create_check_constraint("phase", _in("phase", OLD_PHASES))
