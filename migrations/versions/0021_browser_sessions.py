"""browser sessions: a dashboard login is a row, so logging out ends it for every copy of its cookie

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "browser_sessions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["api_tokens.id"], ondelete="CASCADE",
                                name=op.f("fk_browser_sessions_token_id_api_tokens")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_browser_sessions")),
    )
    op.create_index(op.f("ix_browser_sessions_token_id"), "browser_sessions", ["token_id"])
    op.create_index(op.f("ix_browser_sessions_expires_at"), "browser_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_browser_sessions_expires_at"), table_name="browser_sessions")
    op.drop_index(op.f("ix_browser_sessions_token_id"), table_name="browser_sessions")
    op.drop_table("browser_sessions")
