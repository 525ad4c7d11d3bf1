"""A campaign's rows as plain JSON values and back, for the campaign bundle.

The bundle's columns are the tables' own (models/tables.py): what a row is written as and what an
imported row may hold are derived from the table definitions here, so a column added to a table
travels in bundles without a second schema to keep in step. Ids and foreign keys never travel
(an import gets new ones); neither does the state of a campaign in flight (its probe lease,
Celery task, outbox).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, Integer, String, Text, inspect, select
from sqlalchemy.orm import Session, defer

from models import (
    ImpactFactor,
    MeasurementArtifact,
    RecalibrationEvent,
)
from models.base import UTCDateTime

from ..errors import Invalid
from .results import finite_json

# Columns that name rows of one database, or a campaign's life in flight: never exported.
_LOCAL = {
    "id", "campaign_id", "topology_id", "measurement_id", "recommendation_id",
    "previous_campaign_id", "lease_id", "lease_step", "lease_until", "task_id",
    "dispatched_at", "site_wait_at", "updated_at",
}

def columns(model) -> dict[str, Any]:
    """The exported columns of a table: name -> SQLAlchemy column."""
    return {c.key: c for c in inspect(model).columns if c.key not in _LOCAL}


def to_json(row) -> dict[str, Any]:
    """A row's exported columns as JSON values (timestamps ISO 8601 UTC; NaN/inf as null, also
    inside JSON columns: a file must never fail to export)."""
    out = {}
    for name in columns(type(row)):
        value = getattr(row, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else finite_json(value)
    return out


def from_json(model, data: Any, loc: tuple[str | int, ...]) -> dict[str, Any]:
    """A bundle's row checked against the table: unknown keys refused, each value of the column's
    type; returns the column values (timestamps parsed). Invalid names the field's path."""
    if not isinstance(data, dict):
        raise Invalid("must be an object", loc)
    cols = columns(model)
    unknown = sorted(set(data) - set(cols))
    if unknown:
        raise Invalid(f"unknown keys {unknown}", loc)
    out = {}
    for name, col in cols.items():
        if name not in data:
            if not col.nullable and col.default is None and col.server_default is None:
                raise Invalid("missing", (*loc, name))
            continue
        out[name] = _value(col, data[name], (*loc, name))
        kind = _json_kind(model, name)
        if kind is not None and out[name] is not None and not isinstance(out[name], kind):
            raise Invalid(f"must be {'a list' if kind is list else 'an object'}", (*loc, name))
    return out


def _json_kind(model, name: str) -> type | None:
    """list or dict for a JSON column the table declares as one (`Mapped[list[...]]`), else
    None: the declared shape is checked, so an imported row reads like a stored one."""
    for cls in model.__mro__:
        hint = str(getattr(cls, "__annotations__", {}).get(name, ""))
        if hint:
            inner = hint.removeprefix("Mapped[")
            return list if inner.startswith("list[") else dict if inner.startswith(
                "dict[") else None
    return None


def _value(col, value: Any, loc: tuple[str | int, ...]) -> Any:
    if value is None:
        if not col.nullable:
            raise Invalid("must not be null", loc)
        return None
    kind = col.type
    if isinstance(kind, UTCDateTime):
        if not isinstance(value, str):
            raise Invalid("must be an ISO 8601 timestamp", loc)
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise Invalid(f"{value[:40]!r} is not an ISO 8601 timestamp", loc) from None
        if parsed.tzinfo is None:
            raise Invalid("a timestamp needs its UTC offset", loc)
        return parsed
    if isinstance(kind, Boolean):
        if not isinstance(value, bool):
            raise Invalid("must be true or false", loc)
        return value
    if isinstance(kind, Integer):  # BigInteger too
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid("must be an integer", loc)
        return value
    if isinstance(kind, Float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid("must be a number", loc)
        return float(value)
    if isinstance(kind, String | Text):
        if not isinstance(value, str):
            raise Invalid("must be a string", loc)
        length = getattr(kind, "length", None)
        if length is not None and len(value) > length:
            raise Invalid(f"longer than {length} characters", loc)
        return value
    return value  # a JSON column: any JSON value (the reader has refused NaN and Infinity)


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
    """Insert checked rows (`from_json`) of one table with this database's keys (`campaign_id`,
    `topology_id`, ...)."""
    out = [model(**row, **keys) for row in rows]
    session.add_all(out)
    session.flush()
    return out
