"""recalibration when the path changes: the failover-queued and re-apply event kinds

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-27 17:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KINDS = ("opm_changed", "occ_changed", "obs_moved", "omega_sign_changed",
             "warm_confirmed", "warm_drifted")
ADDED = ("path_changed", "reapply_started", "reapply_refused")
NEW_KINDS = (*OLD_KINDS, *ADDED)


def _check(values: Sequence[str]) -> None:
    # batch mode: SQLite cannot alter a CHECK constraint in place, the table is recreated
    with op.batch_alter_table("recalibration_events", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_recalibration_events_kind"), type_="check")
        batch.create_check_constraint("kind", "kind IN (" + ", ".join(f"'{v}'" for v in values)
                                      + ")")


def upgrade() -> None:
    _check(NEW_KINDS)


def downgrade() -> None:
    kinds = ", ".join(f"'{k}'" for k in ADDED)  # our own constants, no outside input
    op.execute(f"DELETE FROM recalibration_events WHERE kind IN ({kinds})")  # noqa: S608
    _check(OLD_KINDS)
