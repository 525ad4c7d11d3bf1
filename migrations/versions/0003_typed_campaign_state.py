"""typed campaign state (CCs, rounds, recommendation, the probe lease, the dispatch outbox, the
sweep's seed) and the evidence behind every number (observed subflows, buffers read back, quiet
checks, warm-up; Omega's confidence; each arm's model and gate)

Until 0002 they were keys of the JSON bag `campaigns.notes`, updated read-modify-write; the lease
now lives in columns that a worker takes under a row lock. The data moves both ways.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TS = sa.DateTime(timezone=True)

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# notes key -> column (the lease is not carried over: a migration runs with no worker alive)
MOVED = {
    "offered_ccs": "offered_ccs",
    "ccs": "active_ccs",
    "dropped_ccs": "dropped_ccs",
    "impact_runs": "impact_runs",
    "extra_rounds": "extra_rounds",
    "budget_exhausted": "budget_exhausted",
    "recommendation_id": "recommendation_id",
}

campaigns = sa.table(
    "campaigns",
    sa.column("id", sa.Integer),
    sa.column("notes", JSON),
    sa.column("offered_ccs", JSON),
    sa.column("active_ccs", JSON),
    sa.column("dropped_ccs", JSON),
    sa.column("impact_runs", sa.Integer),
    sa.column("extra_rounds", sa.Integer),
    sa.column("budget_exhausted", sa.Boolean),
    sa.column("recommendation_id", sa.Integer),
)


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("offered_ccs", JSON, nullable=True))
        batch.add_column(sa.Column("active_ccs", JSON, nullable=True))
        batch.add_column(sa.Column("dropped_ccs", JSON, nullable=False, server_default="{}"))
        batch.add_column(sa.Column("impact_runs", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("extra_rounds", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("budget_exhausted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("recommendation_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("lease_id", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("lease_step", JSON, nullable=True))
        batch.add_column(sa.Column("lease_until", TS, nullable=True))
        batch.add_column(sa.Column("dispatched_at", TS, nullable=True))
        batch.add_column(sa.Column("extra_impact_runs", JSON, nullable=False, server_default="{}"))
        batch.add_column(sa.Column("seed", sa.Integer(), nullable=False, server_default="0"))
    _add_evidence()
    conn = op.get_bind()
    for row in conn.execute(sa.select(campaigns.c.id, campaigns.c.notes)).all():
        notes = dict(row.notes or {})
        values = {col: notes.pop(key) for key, col in MOVED.items() if key in notes}
        notes.pop("lease", None)
        values["notes"] = notes
        conn.execute(campaigns.update().where(campaigns.c.id == row.id).values(**values))
    with op.batch_alter_table("campaigns") as batch:
        batch.alter_column("extra_impact_runs", server_default=None)
        batch.alter_column("seed", server_default=None)
        batch.alter_column("dropped_ccs", server_default=None)
        batch.alter_column("extra_rounds", server_default=None)
        batch.alter_column("budget_exhausted", server_default=None)


def _add_evidence() -> None:
    """What a probe really ran, Omega's confidence, and each arm's model and gate."""
    with op.batch_alter_table("measurements") as batch:
        batch.add_column(sa.Column("observed_subflows", JSON, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("effective_buffers", JSON, nullable=False, server_default="{}"))
        batch.add_column(sa.Column("quiet_check", JSON, nullable=True))
        batch.add_column(sa.Column("warmup_s", sa.Float(), nullable=False, server_default="0"))
    with op.batch_alter_table("impact_factors") as batch:
        batch.add_column(sa.Column("omega_low", sa.Float(), nullable=True))
        batch.add_column(sa.Column("omega_high", sa.Float(), nullable=True))
        batch.add_column(sa.Column("settled", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("runs", sa.Integer(), nullable=True))
    with op.batch_alter_table("fits") as batch:
        batch.add_column(sa.Column("arms", JSON, nullable=False, server_default="[]"))
    for table, cols in EVIDENCE_DEFAULTS.items():
        with op.batch_alter_table(table) as batch:
            for col in cols:
                batch.alter_column(col, server_default=None)


EVIDENCE_DEFAULTS = {
    "measurements": ("observed_subflows", "effective_buffers", "warmup_s"),
    "fits": ("arms",),
}


def _drop_evidence() -> None:
    with op.batch_alter_table("fits") as batch:
        batch.drop_column("arms")
    with op.batch_alter_table("impact_factors") as batch:
        for col in ("runs", "settled", "omega_high", "omega_low"):
            batch.drop_column(col)
    with op.batch_alter_table("measurements") as batch:
        for col in ("warmup_s", "quiet_check", "effective_buffers", "observed_subflows"):
            batch.drop_column(col)


def downgrade() -> None:
    _drop_evidence()
    conn = op.get_bind()
    cols = [campaigns.c[col] for col in MOVED.values()]
    for row in conn.execute(sa.select(campaigns.c.id, campaigns.c.notes, *cols)).all():
        notes = dict(row.notes or {})
        for key, col in MOVED.items():
            value = getattr(row, col)
            if value is not None and not (col == "extra_rounds" and value == 0):
                notes[key] = value
        if not notes.get("budget_exhausted"):
            notes.pop("budget_exhausted", None)
        conn.execute(campaigns.update().where(campaigns.c.id == row.id).values(notes=notes))
    with op.batch_alter_table("campaigns") as batch:
        new = ["seed", "extra_impact_runs", "dispatched_at", "lease_until", "lease_step",
               "lease_id"]
        for col in new + list(reversed(MOVED.values())):
            batch.drop_column(col)
