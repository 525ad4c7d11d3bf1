"""The dashboard's own reads: aggregates and latest rows its pages show that no other store
function gives. Read-only."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import (
    Campaign,
    FitRecord,
    ImpactFactor,
    Measurement,
    MeasurementArtifact,
    MeasurementPhase,
    Recommendation,
    Topology,
)
from probes.vocabulary import PathManager

#: the paced probes' per-frame file, as `probes.frames.FRAMES_ARTIFACT` names it (the store
#: reads rows and imports no probe code)
FRAMES_ARTIFACT = "frames.csv"


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
            Measurement.phase == MeasurementPhase.SWEEP,
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


def tool_counts(session: Session, campaign_id: int) -> list[tuple[str, str, int]]:
    """(tool, version, probes) of the campaign's measurements: what its probes really ran on."""
    rows = session.execute(
        select(Measurement.tool, Measurement.tool_version, func.count(Measurement.id))
        .where(Measurement.campaign_id == campaign_id)
        .group_by(Measurement.tool, Measurement.tool_version)
        .order_by(Measurement.tool, Measurement.tool_version)
    )
    return [(tool or "none", version or "", int(n)) for tool, version, n in rows]


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


def newest_bulk_campaign_with(session: Session, topology_id: int, what: type) -> Campaign | None:
    """The newest *bulk* campaign of the topology with rows in `what` (the Fits page's default:
    a stream campaign's fits are of its flat paced goodput, not the answer a bulk user gets)."""
    return session.scalar(
        select(Campaign)
        .where(
            Campaign.topology_id == topology_id,
            Campaign.objective_key == "bulk",
            select(what.id).where(what.campaign_id == Campaign.id).exists(),
        )
        .order_by(Campaign.id.desc())
        .limit(1)
    )


@dataclass(frozen=True)
class FramesFile:
    """One ok buffer-phase probe's stored `frames.csv` with what places it."""

    measurement_id: int
    pm: PathManager
    cc: str
    bs_mib: float
    run: int
    warmup_s: float
    text: str


def campaign_frames(session: Session, campaign_id: int) -> list[FramesFile]:
    """Every ok buffer-phase probe of the campaign that stored a frames file, by arm, buffer
    and run."""
    rows = session.execute(
        select(Measurement.id, Measurement.pm, Measurement.cc, Measurement.bs_mib,
               Measurement.run, Measurement.warmup_s, MeasurementArtifact.gzip_data)
        .join(MeasurementArtifact, MeasurementArtifact.measurement_id == Measurement.id)
        .where(
            Measurement.campaign_id == campaign_id,
            Measurement.phase == MeasurementPhase.SWEEP,
            Measurement.status == "ok",
            MeasurementArtifact.name == FRAMES_ARTIFACT,
        )
        .order_by(Measurement.pm, Measurement.cc, Measurement.bs_mib, Measurement.run,
                  Measurement.id)
    )
    return [FramesFile(mid, pm, cc, float(bs), int(run), float(warm or 0.0),
                       gzip.decompress(data).decode("utf-8", "replace"))
            for mid, pm, cc, bs, run, warm, data in rows]

