"""the autotuning ceiling's probes: an "autotune" measurement phase, whose key's bs_mib is the
tcp_rmem/tcp_wmem maximum the probe ran under (the probe itself sets no socket buffer)

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-03 13:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_PHASES = ("impact", "buffer", "warm", "selection")
NEW_PHASES = (*OLD_PHASES, "autotune")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    # batch mode: SQLite cannot alter a CHECK constraint in place
    with op.batch_alter_table("measurements", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_measurements_phase"), type_="check")
        batch.create_check_constraint("phase", _in("phase", NEW_PHASES))


def downgrade() -> None:
    op.execute("DELETE FROM measurements WHERE phase = 'autotune'")
    with op.batch_alter_table("measurements", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_measurements_phase"), type_="check")
        batch.create_check_constraint("phase", _in("phase", OLD_PHASES))
