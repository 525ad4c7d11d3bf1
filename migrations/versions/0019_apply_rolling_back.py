"""applied answers: the state `rolling_back` (a rollback asked, the sites at it)

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = ("applying", "applied", "unconfirmed", "rolled_back", "failed")
NEW = ("applying", "applied", "unconfirmed", "rolling_back", "rolled_back", "failed")


def _states(states: tuple[str, ...]) -> str:
    return "state IN (" + ", ".join(f"'{s}'" for s in states) + ")"


def upgrade() -> None:
    # batch mode: SQLite cannot alter a CHECK constraint in place
    with op.batch_alter_table("applied_answers", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_applied_answers_state"), type_="check")
        batch.create_check_constraint("state", _states(NEW))


def downgrade() -> None:
    # a row caught mid-rollback is settled as still applied: its sites' journals say the rest
    op.execute("UPDATE applied_answers SET state = 'applied' WHERE state = 'rolling_back'")
    with op.batch_alter_table("applied_answers", recreate="auto") as batch:
        batch.drop_constraint(op.f("ck_applied_answers_state"), type_="check")
        batch.create_check_constraint("state", _states(OLD))
