"""Recommendation rows (Table 5): every answer given, and the calibrated campaign behind one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from models import Campaign, FitRecord, Recommendation

from ..errors import NotFound


def add_recommendation(session: Session, **values: Any) -> Recommendation:
    """Store one answer (the only way recommendations are written)."""
    rec = Recommendation(**values)
    session.add(rec)
    session.flush()
    return rec


def get_recommendation(session: Session, *, recommendation_id: int) -> Recommendation:
    rec = session.get(Recommendation, recommendation_id)
    if rec is None:
        raise NotFound(f"recommendation {recommendation_id} not found")
    return rec


def find_calibrated(
    session: Session, *, campaign_id: int, inputs: dict[str, Any], quality_flags: list[str]
) -> Recommendation | None:
    """A stored calibrated answer of the campaign to the same inputs with the same flags."""
    rows = session.scalars(
        select(Recommendation)
        .where(
            Recommendation.campaign_id == campaign_id,
            Recommendation.kind == "calibrated",
            Recommendation.topology_id == inputs["topology_id"],
            Recommendation.delta == inputs["delta"],
            Recommendation.bs_min_mib == inputs["bs_min_mib"],
            Recommendation.bs_max_mib == inputs["bs_max_mib"],
        )
        .order_by(Recommendation.id.desc())
        .limit(20)
    )
    for rec in rows:
        if rec.inputs == inputs and list(rec.quality_flags or []) == list(quality_flags):
            return rec
    return None


def list_recommendations(
    session: Session,
    *,
    topology_id: int | None = None,
    kind: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Recommendation], int]:
    query = select(Recommendation)
    if topology_id is not None:
        query = query.where(Recommendation.topology_id == topology_id)
    if kind is not None:
        query = query.where(Recommendation.kind == kind)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Recommendation.id.desc()).limit(limit).offset(offset))
    return list(rows), total


def calibrated_recommendation_of(
    session: Session, *, campaign_id: int
) -> Recommendation | None:
    """The answer a campaign gave when it finished."""
    return session.scalar(
        select(Recommendation)
        .where(Recommendation.campaign_id == campaign_id, Recommendation.kind == "calibrated")
        .order_by(Recommendation.id)
        .limit(1)
    )


_LATEST_CALIBRATED = None


def latest_calibrated_version(session: Session, *, topology_id: int) -> tuple | None:
    """(id, finished_at, updated_at) of `latest_calibrated_campaign`, as one plain row (the hot
    path: enough to key a cached answer)."""
    global _LATEST_CALIBRATED
    if _LATEST_CALIBRATED is None:
        has_fits = (
            select(FitRecord.id)
            .where(FitRecord.campaign_id == Campaign.id,
                   FitRecord.model_kind == Campaign.model_kind)
            .exists()
        )
        _LATEST_CALIBRATED = (
            select(Campaign.id, Campaign.finished_at, Campaign.updated_at)
            .where(Campaign.topology_id == bindparam("topology_id"), Campaign.state == "done",
                   has_fits, Campaign.objective_key == "bulk")
            .order_by(Campaign.finished_at.desc(), Campaign.id.desc())
            .limit(1)
        )
    row = session.connection().execute(_LATEST_CALIBRATED, {"topology_id": topology_id}).first()
    return tuple(row) if row is not None else None


def latest_calibrated_campaign(session: Session, *, topology_id: int,
                               objective_key: str = "bulk") -> Campaign | None:
    """The newest finished campaign of the topology for this objective (`Objective.key()`)
    that has fits of its own model kind."""
    has_fits = (
        select(FitRecord.id)
        .where(FitRecord.campaign_id == Campaign.id, FitRecord.model_kind == Campaign.model_kind)
        .exists()
    )
    return session.scalar(
        select(Campaign)
        .where(Campaign.topology_id == topology_id, Campaign.state == "done", has_fits,
               Campaign.objective_key == objective_key)
        .order_by(Campaign.finished_at.desc(), Campaign.id.desc())
        .limit(1)
    )
