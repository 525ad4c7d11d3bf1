"""measurement artifacts (raw probe outputs, gzip) and site capability reports

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# JSONB on PostgreSQL, JSON text elsewhere (as models.base.JSONType).
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "measurement_artifacts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("measurement_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("media_type", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("gzip_data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["measurement_id"], ["measurements.id"], ondelete="CASCADE",
                                name=op.f("fk_measurement_artifacts_measurement_id_measurements")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measurement_artifacts")),
        sa.UniqueConstraint("measurement_id", "name",
                            name=op.f("uq_measurement_artifacts_measurement_id_name")),
    )
    op.create_index(op.f("ix_measurement_artifacts_measurement_id"), "measurement_artifacts",
                    ["measurement_id"])
    op.create_table(
        "site_capabilities",
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.Column("report", JSON, nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["site_id"], ["sites.id"], ondelete="CASCADE",
                                name=op.f("fk_site_capabilities_site_id_sites")),
        sa.PrimaryKeyConstraint("site_id", name=op.f("pk_site_capabilities")),
    )


def downgrade() -> None:
    op.drop_table("site_capabilities")
    op.drop_index(op.f("ix_measurement_artifacts_measurement_id"), "measurement_artifacts")
    op.drop_table("measurement_artifacts")
