"""A campaign's rows as plain JSON values and back, for the campaign bundle.

The bundle's columns are the tables' own (models/tables.py): what a row is written as is derived
from the table definitions here. What an imported row may hold is the schema of the bundle's
version (flows/takeaways/bundle_schema_v1): strict types and the ranges a campaign can produce,
which a table's column type alone does not say. Ids and foreign keys never travel (an import gets
new ones); neither does the state of a campaign in flight (its probe lease, Celery task, outbox).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import inspect, select
from sqlalchemy.orm import Session, defer

from models import ImpactFactor, MeasurementArtifact, RecalibrationEvent

from .results import finite_json

# Columns that name rows of one database, or a campaign's life in flight: never exported.
_LOCAL = {
    "id", "campaign_id", "topology_id", "measurement_id", "recommendation_id",
    "previous_campaign_id", "lease_id", "lease_owner", "lease_step", "lease_until", "task_id",
    "dispatched_at", "site_wait_at", "updated_at",
}

def columns(model) -> dict[str, str]:
    """The exported columns of a table: column name (the bundle's key) -> the row's attribute
    (`campaigns.run_state` is `Campaign.run_state_json`)."""
    mapper = inspect(model)
    return {c.key: mapper.get_property_by_column(c).key for c in mapper.columns
            if c.key not in _LOCAL}


def to_json(row) -> dict[str, Any]:
    """A row's exported columns as JSON values (timestamps ISO 8601 UTC; NaN/inf as null, also
    inside JSON columns: a file must never fail to export; a campaign's state in its stored
    form)."""
    out = {}
    for name, attribute in columns(type(row)).items():
        value = getattr(row, attribute)
        out[name] = value.isoformat() if isinstance(value, datetime) else finite_json(value)
    return out


# --- reads -------------------------------------------------------------------------------------
def impact_rows(session: Session, *, campaign_id: int) -> list[ImpactFactor]:
    return list(session.scalars(
        select(ImpactFactor).where(ImpactFactor.campaign_id == campaign_id)
        .order_by(ImpactFactor.id)
    ))


def event_rows(session: Session, *, campaign_id: int) -> list[RecalibrationEvent]:
    return list(session.scalars(
        select(RecalibrationEvent).where(RecalibrationEvent.campaign_id == campaign_id)
        .order_by(RecalibrationEvent.id)
    ))


def artifact_rows(session: Session, *, measurement_ids: list[int]) -> list[MeasurementArtifact]:
    if not measurement_ids:
        return []
    # their content is read one at a time when written (artifacts.get_artifact), never all
    return list(session.scalars(
        select(MeasurementArtifact)
        .where(MeasurementArtifact.measurement_id.in_(measurement_ids))
        .options(defer(MeasurementArtifact.gzip_data))
        .order_by(MeasurementArtifact.measurement_id, MeasurementArtifact.name)
    ))


# --- writes (an import) -----------------------------------------------------------------------
def add_rows(session: Session, model, rows: list[dict[str, Any]], **keys: Any) -> list:
    """Insert checked rows (flows/takeaways/bundle_schema) of one table, by column name, with
    this database's keys (`campaign_id`, `topology_id`, ...)."""
    attribute = columns(model)
    out = [model(**{attribute.get(k, k): v for k, v in row.items()}, **keys) for row in rows]
    session.add_all(out)
    session.flush()
    return out
