"""The dashboard's own reads: aggregates and latest rows its pages show that no other store
function gives. Read-only."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import Campaign, FitRecord, ImpactFactor, Measurement, Recommendation, Topology


def latest_by_topology(session: Session, model, topology_ids: list[int]) -> dict[int, Any]:
    """The newest row of `model` (Recommendation or Campaign, by id) for each topology id."""
    if not topology_ids:
        return {}
    newest = (
        select(func.max(model.id))
        .where(model.topology_id.in_(topology_ids))
        .group_by(model.topology_id)
    )
    rows = session.scalars(select(model).where(model.id.in_(newest)))
    return {row.topology_id: row for row in rows}


def latest_recommendations(session: Session, topology_ids: list[int]) -> dict[int, Recommendation]:
    return latest_by_topology(session, Recommendation, topology_ids)


def latest_campaigns(session: Session, topology_ids: list[int]) -> dict[int, Campaign]:
    return latest_by_topology(session, Campaign, topology_ids)


def omega_history(
    session: Session, campaign_ids: list[int]
) -> list[tuple[int, str, str, float]]:
    """(campaign id, subflow, CC, Omega) of every impact factor of these campaigns."""
    if not campaign_ids:
        return []
    rows = session.execute(
        select(
            ImpactFactor.campaign_id, ImpactFactor.subflow, ImpactFactor.cc, ImpactFactor.omega
        ).where(ImpactFactor.campaign_id.in_(campaign_ids))
    )
    return [tuple(row) for row in rows]


def measured_points(session: Session, campaign_id: int) -> list[dict]:
    """Buffer-phase runs grouped per (PM, CC, buffer): mean, min, max goodput and run count."""
    rows = session.execute(
        select(
            Measurement.pm,
            Measurement.cc,
            Measurement.bs_mib,
            func.avg(Measurement.mean_goodput_mbps),
            func.min(Measurement.mean_goodput_mbps),
            func.max(Measurement.mean_goodput_mbps),
            func.count(Measurement.id),
        )
        .where(
            Measurement.campaign_id == campaign_id,
            Measurement.phase == "buffer",
            Measurement.status == "ok",
            Measurement.mean_goodput_mbps.is_not(None),
        )
        .group_by(Measurement.pm, Measurement.cc, Measurement.bs_mib)
        .order_by(Measurement.pm, Measurement.cc, Measurement.bs_mib)
    )
    return [
        {
            "pm": pm,
            "cc": cc,
            "bs": float(bs),
            "tp": float(mean),
            "min": float(lo),
            "max": float(hi),
            "n": int(n),
        }
        for pm, cc, bs, mean, lo, hi, n in rows
    ]


def measurement_counts(session: Session, campaign_id: int) -> dict[str, dict[str, int]]:
    """phase -> status -> number of the campaign's measurements."""
    counts = session.execute(
        select(Measurement.phase, Measurement.status, func.count(Measurement.id))
        .where(Measurement.campaign_id == campaign_id)
        .group_by(Measurement.phase, Measurement.status)
    )
    by_phase: dict[str, dict[str, int]] = {}
    for phase, status, n in counts:
        by_phase.setdefault(phase, {})[status] = int(n)
    return by_phase


def derived_counts(session: Session, campaign_id: int) -> dict[str, int]:
    """How many impact factors, fits and recommendations the campaign has."""

    def count(model) -> int:
        return session.scalar(
            select(func.count(model.id)).where(model.campaign_id == campaign_id)
        ) or 0

    return {
        "impact_count": count(ImpactFactor),
        "fit_count": count(FitRecord),
        "recommendation_count": count(Recommendation),
    }


def latest_measurements(session: Session, campaign_id: int, limit: int) -> list[Measurement]:
    return list(session.scalars(
        select(Measurement).where(Measurement.campaign_id == campaign_id)
        .order_by(Measurement.id.desc()).limit(limit)))


def topology_or_none(session: Session, topology_id: int) -> Topology | None:
    return session.get(Topology, topology_id)


def campaign_or_none(session: Session, campaign_id: int | None) -> Campaign | None:
    return session.get(Campaign, campaign_id) if campaign_id else None
