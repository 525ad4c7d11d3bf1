"""campaign run state: the notes and the seven budget columns become one versioned JSON column

`campaigns.run_state` holds what service/state/campaign_state.py types as `CampaignState`: the probe
budget (the columns probe_seconds_budget, probes_total, probes_done, probe_seconds_used,
extra_impact_runs, extra_rounds, budget_exhausted, and notes["probe_budget"]) and every other
key the phases wrote into `notes`. The data moves both ways. The conversion is written out here,
not imported: a migration converts what the schema was at its revision, whatever the code
becomes later.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

BUDGET_COLUMNS = {
    "probe_seconds_budget": sa.Float(),
    "probes_total": sa.Integer(),
    "probes_done": sa.Integer(),
    "probe_seconds_used": sa.Float(),
    "extra_impact_runs": JSON,
    "extra_rounds": sa.Integer(),
    "budget_exhausted": sa.Boolean(),
}
# notes key -> run_state key
NOTE_KEYS = {
    "warm": "warm", "omega_ccs": "omega_ccs", "unsettled_omegas": "unsettled_omegas",
    "selection": "selection", "adaptive": "sweep_decision", "grid_extended": "grid_extended",
    "grid_below_plateau": "grid_below_plateau", "failed_probes": "failed_probes",
    "unfitted_arms": "unfitted_arms", "imported": "imported",
}

campaigns = sa.table(
    "campaigns",
    sa.column("id", sa.Integer),
    sa.column("notes", JSON),
    sa.column("run_state", JSON),
    *(sa.column(name, type_) for name, type_ in BUDGET_COLUMNS.items()),
)


def to_state(columns: dict, notes: dict | None) -> dict:
    """The run_state of a campaign stored with notes and budget columns."""
    notes = dict(notes or {})
    note = dict(notes.pop("probe_budget", None) or {})
    budget_s = columns.get("probe_seconds_budget")
    state = {
        "version": 1,
        "budget": {
            "cap_s": budget_s if budget_s is not None else note.get("budget_s"),
            "planned": int(columns.get("probes_total") or 0),
            "done": int(columns.get("probes_done") or 0),
            "used_s": float(columns.get("probe_seconds_used") or 0.0),
            "phase_plan": note.get("planned") or {}, "spent": note.get("spent") or {},
            "asked": note.get("asked") or {}, "settled": bool(note.get("settled", False)),
            "exhausted": bool(columns.get("budget_exhausted") or False),
            "extra_impact_runs": columns.get("extra_impact_runs") or {},
            "extra_rounds": int(columns.get("extra_rounds") or 0),
        },
    }
    for key, name in NOTE_KEYS.items():
        state[name] = notes.pop(key, None)
    state["other"] = notes
    return state


def from_state(state: dict | None) -> tuple[dict, dict]:
    """(budget columns, notes) of a run_state: `to_state` undone."""
    state = dict(state or {})
    budget = state.get("budget") or {}
    columns = {
        "probe_seconds_budget": budget.get("cap_s"),
        "probes_total": int(budget.get("planned") or 0),
        "probes_done": int(budget.get("done") or 0),
        "probe_seconds_used": float(budget.get("used_s") or 0.0),
        "extra_impact_runs": budget.get("extra_impact_runs") or {},
        "extra_rounds": int(budget.get("extra_rounds") or 0),
        "budget_exhausted": bool(budget.get("exhausted") or False),
    }
    notes = dict(state.get("other") or {})
    for key, name in NOTE_KEYS.items():
        if state.get(name) is not None:
            notes[key] = state[name]
    if any(budget.get(k) for k in ("phase_plan", "spent", "asked", "settled", "planned")):
        note = {"spent": budget.get("spent") or {}}
        if budget.get("phase_plan") or budget.get("planned"):
            note["planned"] = budget.get("phase_plan") or {}
            note["budget_s"] = budget.get("cap_s")
        if budget.get("asked"):
            note["asked"] = budget["asked"]
        if budget.get("settled"):
            note["settled"] = True
        notes["probe_budget"] = note
    return columns, notes


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("run_state", JSON, nullable=False, server_default="{}"))
    conn = op.get_bind()
    budget_cols = [campaigns.c[name] for name in BUDGET_COLUMNS]
    for row in conn.execute(sa.select(campaigns.c.id, campaigns.c.notes, *budget_cols)).all():
        columns = {name: getattr(row, name) for name in BUDGET_COLUMNS}
        conn.execute(campaigns.update().where(campaigns.c.id == row.id)
                     .values(run_state=to_state(columns, row.notes)))
    with op.batch_alter_table("campaigns") as batch:
        batch.alter_column("run_state", server_default=None)
        for name in ("notes", *BUDGET_COLUMNS):
            batch.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("notes", JSON, nullable=False, server_default="{}"))
        batch.add_column(sa.Column("probe_seconds_budget", sa.Float(), nullable=True))
        for name in ("probes_total", "probes_done", "extra_rounds"):
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("probe_seconds_used", sa.Float(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("extra_impact_runs", JSON, nullable=False,
                                   server_default="{}"))
        batch.add_column(sa.Column("budget_exhausted", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    conn = op.get_bind()
    for row in conn.execute(sa.select(campaigns.c.id, campaigns.c.run_state)).all():
        columns, notes = from_state(row.run_state)
        conn.execute(campaigns.update().where(campaigns.c.id == row.id)
                     .values(notes=notes, **columns))
    with op.batch_alter_table("campaigns") as batch:
        for name in ("probes_total", "probes_done", "extra_rounds", "probe_seconds_used",
                     "extra_impact_runs", "budget_exhausted"):
            batch.alter_column(name, server_default=None)
        batch.drop_column("run_state")
