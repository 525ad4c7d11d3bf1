"""warm recalibration: a "warm" measurement phase and its two event kinds

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 07:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_PHASES = ("impact", "buffer")
NEW_PHASES = (*OLD_PHASES, "warm")
OLD_KINDS = ("opm_changed", "occ_changed", "obs_moved", "omega_sign_changed")
NEW_KINDS = (*OLD_KINDS, "warm_confirmed", "warm_drifted")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _check(table: str, column: str, values: Sequence[str]) -> None:
    # batch mode: SQLite cannot alter a CHECK constraint in place, the table is recreated
    with op.batch_alter_table(table, recreate="auto") as batch:
        batch.drop_constraint(op.f(f"ck_{table}_{column}"), type_="check")
        batch.create_check_constraint(column, _in(column, values))


def upgrade() -> None:
    _check("measurements", "phase", NEW_PHASES)
    _check("recalibration_events", "kind", NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM measurements WHERE phase = 'warm'")
    op.execute("DELETE FROM recalibration_events WHERE kind IN ('warm_confirmed', 'warm_drifted')")
    _check("measurements", "phase", OLD_PHASES)
    _check("recalibration_events", "kind", OLD_KINDS)
