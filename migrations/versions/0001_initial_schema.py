"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 05:34:07.236995
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# JSONB on PostgreSQL, JSON text elsewhere (as models.base.JSONType).
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("name", name=op.f("uq_api_tokens_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "sites",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("description", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sites")),
        sa.UniqueConstraint("name", name=op.f("uq_sites_name")),
    )
    op.create_table(
        "isps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("label", sa.String(length=8), nullable=False),
        sa.Column("down_kbps", sa.Float(), nullable=False),
        sa.Column("up_kbps", sa.Float(), nullable=False),
        sa.CheckConstraint(
            "down_kbps > 0 AND up_kbps > 0", name=op.f("ck_isps_positive_bandwidth")
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["sites.id"], name=op.f("fk_isps_site_id_sites"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_isps")),
        sa.UniqueConstraint("site_id", "label", name=op.f("uq_isps_site_id_label")),
        sa.UniqueConstraint("site_id", "name", name=op.f("uq_isps_site_id_name")),
    )
    op.create_index(op.f("ix_isps_site_id"), "isps", ["site_id"], unique=False)
    op.create_table(
        "topologies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("local_site_id", sa.Integer(), nullable=False),
        sa.Column("remote_site_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "local_site_id <> remote_site_id", name=op.f("ck_topologies_distinct_sites")
        ),
        sa.ForeignKeyConstraint(
            ["local_site_id"],
            ["sites.id"],
            name=op.f("fk_topologies_local_site_id_sites"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["remote_site_id"],
            ["sites.id"],
            name=op.f("fk_topologies_remote_site_id_sites"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_topologies")),
        sa.UniqueConstraint(
            "local_site_id",
            "remote_site_id",
            name=op.f("uq_topologies_local_site_id_remote_site_id"),
        ),
    )
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topology_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("ccs", JSON, nullable=False),
        sa.Column("pms", JSON, nullable=False),
        sa.Column("buffer_grid_mib", JSON, nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("model_kind", sa.String(length=16), nullable=False),
        sa.Column("probe_seconds_budget", sa.Float(), nullable=True),
        sa.Column("probes_total", sa.Integer(), nullable=False),
        sa.Column("probes_done", sa.Integer(), nullable=False),
        sa.Column("probe_seconds_used", sa.Float(), nullable=False),
        sa.Column("executor", sa.String(length=32), nullable=True),
        sa.Column("task_id", sa.String(length=200), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'done', 'failed', 'cancelled')",
            name=op.f("ck_campaigns_state"),
        ),
        sa.CheckConstraint("runs >= 1 AND duration_s > 0", name=op.f("ck_campaigns_positive_plan")),
        sa.ForeignKeyConstraint(
            ["topology_id"],
            ["topologies.id"],
            name=op.f("fk_campaigns_topology_id_topologies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
    )
    op.create_index(op.f("ix_campaigns_state"), "campaigns", ["state"], unique=False)
    op.create_index(op.f("ix_campaigns_topology_id"), "campaigns", ["topology_id"], unique=False)
    op.create_table(
        "subflows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topology_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=20), nullable=False),
        sa.Column("local_isp_id", sa.Integer(), nullable=False),
        sa.Column("remote_isp_id", sa.Integer(), nullable=False),
        sa.Column("bandwidth_kbps", sa.Float(), nullable=False),
        sa.Column("rtt_ms", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["local_isp_id"],
            ["isps.id"],
            name=op.f("fk_subflows_local_isp_id_isps"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["remote_isp_id"],
            ["isps.id"],
            name=op.f("fk_subflows_remote_isp_id_isps"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["topology_id"],
            ["topologies.id"],
            name=op.f("fk_subflows_topology_id_topologies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subflows")),
        sa.UniqueConstraint("topology_id", "name", name=op.f("uq_subflows_topology_id_name")),
    )
    op.create_index(op.f("ix_subflows_topology_id"), "subflows", ["topology_id"], unique=False)
    op.create_table(
        "fits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("pm", sa.String(length=16), nullable=False),
        sa.Column("model_kind", sa.String(length=16), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("curves", JSON, nullable=False),
        sa.Column("coefficients", JSON, nullable=False),
        sa.Column("curve_p_values", JSON, nullable=False),
        sa.Column("r2", sa.Float(), nullable=False),
        sa.Column("adj_r2", sa.Float(), nullable=True),
        sa.Column("buffer_p_value", sa.Float(), nullable=True),
        sa.Column("gate_passed", sa.Boolean(), nullable=False),
        sa.Column("warnings", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_fits_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fits")),
        sa.UniqueConstraint(
            "campaign_id", "pm", "model_kind", name=op.f("uq_fits_campaign_id_pm_model_kind")
        ),
    )
    op.create_index(op.f("ix_fits_campaign_id"), "fits", ["campaign_id"], unique=False)
    op.create_table(
        "impact_factors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("cc", sa.String(length=16), nullable=False),
        sa.Column("subflow", sa.String(length=20), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("omega", sa.Float(), nullable=False),
        sa.Column("in_subset", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_impact_factors_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_impact_factors")),
        sa.UniqueConstraint(
            "campaign_id", "cc", "subflow", name=op.f("uq_impact_factors_campaign_id_cc_subflow")
        ),
    )
    op.create_index(
        op.f("ix_impact_factors_campaign_id"), "impact_factors", ["campaign_id"], unique=False
    )
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("pm", sa.String(length=16), nullable=False),
        sa.Column("cc", sa.String(length=16), nullable=False),
        sa.Column("bs_mib", sa.Float(), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("excluded_subflow", sa.String(length=20), nullable=False),
        sa.Column("subflows", JSON, nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("interval_s", sa.Float(), nullable=False),
        sa.Column("goodput_mbps", JSON, nullable=False),
        sa.Column("mean_goodput_mbps", sa.Float(), nullable=True),
        sa.Column("subflow_bytes", JSON, nullable=False),
        sa.Column("rtt_ms", JSON, nullable=False),
        sa.Column("rto_ms", JSON, nullable=False),
        sa.Column("tool", sa.String(length=64), nullable=False),
        sa.Column("tool_version", sa.String(length=64), nullable=False),
        sa.Column("raw_output", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("phase IN ('impact', 'buffer')", name=op.f("ck_measurements_phase")),
        sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f("ck_measurements_status")),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_measurements_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measurements")),
        sa.UniqueConstraint(
            "campaign_id",
            "phase",
            "pm",
            "cc",
            "bs_mib",
            "run",
            "excluded_subflow",
            name="uq_measurements_key",
        ),
    )
    op.create_index(
        op.f("ix_measurements_campaign_id"), "measurements", ["campaign_id"], unique=False
    )
    op.create_table(
        "recommendations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topology_id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("bs_min_mib", sa.Float(), nullable=False),
        sa.Column("bs_max_mib", sa.Float(), nullable=False),
        sa.Column("inputs", JSON, nullable=False),
        sa.Column("opm", sa.String(length=16), nullable=False),
        sa.Column("occ", sa.String(length=16), nullable=True),
        sa.Column("obs_mib", sa.Float(), nullable=True),
        sa.Column("otp_mbps", sa.Float(), nullable=True),
        sa.Column("tp_max_mbps", sa.Float(), nullable=True),
        sa.Column("outputs", JSON, nullable=False),
        sa.Column("traditional", JSON, nullable=False),
        sa.Column("provenance", JSON, nullable=False),
        sa.Column("quality_flags", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN ('calibrated', 'provisional')", name=op.f("ck_recommendations_kind")
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_recommendations_campaign_id_campaigns"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["topology_id"],
            ["topologies.id"],
            name=op.f("fk_recommendations_topology_id_topologies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recommendations")),
    )
    op.create_index(
        op.f("ix_recommendations_created_at"), "recommendations", ["created_at"], unique=False
    )
    op.create_index(
        op.f("ix_recommendations_topology_id"), "recommendations", ["topology_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_recommendations_topology_id"), table_name="recommendations")
    op.drop_index(op.f("ix_recommendations_created_at"), table_name="recommendations")
    op.drop_table("recommendations")
    op.drop_index(op.f("ix_measurements_campaign_id"), table_name="measurements")
    op.drop_table("measurements")
    op.drop_index(op.f("ix_impact_factors_campaign_id"), table_name="impact_factors")
    op.drop_table("impact_factors")
    op.drop_index(op.f("ix_fits_campaign_id"), table_name="fits")
    op.drop_table("fits")
    op.drop_index(op.f("ix_subflows_topology_id"), table_name="subflows")
    op.drop_table("subflows")
    op.drop_index(op.f("ix_campaigns_topology_id"), table_name="campaigns")
    op.drop_index(op.f("ix_campaigns_state"), table_name="campaigns")
    op.drop_table("campaigns")
    op.drop_table("topologies")
    op.drop_index(op.f("ix_isps_site_id"), table_name="isps")
    op.drop_table("isps")
    op.drop_table("sites")
    op.drop_table("api_tokens")
