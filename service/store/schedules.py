"""Recalibration schedules (a cron expression per topology), the calibration history, and the
change events recorded between two calibrations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from croniter import CroniterError, croniter
from sqlalchemy import select
from sqlalchemy.orm import Session

from models import AppliedAnswer, Campaign, utcnow
from models.history import EVENT_KINDS, RecalibrationEvent, RecalibrationSchedule

from ..errors import Invalid, NotFound
from .inventory import get_topology
from .recommendations import calibrated_recommendation_of

SUBJECT_MAX = RecalibrationEvent.__table__.c.subject.type.length  # what the column holds


def check_cron(cron: str) -> str:
    cron = " ".join(cron.split())
    if len(cron) > 120 or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise Invalid(f"not a 5-field cron expression: {cron!r}", ("body", "cron"))
    # Syntax is not enough: '0 0 31 2 *' parses but never fires, and beat would fail on it.
    try:
        croniter(cron, utcnow()).get_next(datetime)
    except (CroniterError, ValueError) as exc:
        raise Invalid(f"cron expression {cron!r} never fires: {exc}", ("body", "cron")) from exc
    return cron


def set_schedule(
    session: Session,
    *,
    topology_id: int,
    cron: str,
    enabled: bool = True,
    parameters: dict[str, Any],
) -> RecalibrationSchedule:
    """Create or replace the topology's schedule (`parameters`: a validated campaign plan)."""
    get_topology(session, topology_id=topology_id)
    cron = check_cron(cron)
    row = session.scalar(
        select(RecalibrationSchedule).where(RecalibrationSchedule.topology_id == topology_id)
    )
    if row is None:
        row = RecalibrationSchedule(topology_id=topology_id, cron=cron, created_at=utcnow())
        session.add(row)
    row.cron, row.enabled, row.parameters = cron, enabled, parameters
    session.flush()
    return row


def get_schedule(session: Session, *, topology_id: int) -> RecalibrationSchedule:
    get_topology(session, topology_id=topology_id)
    row = session.scalar(
        select(RecalibrationSchedule).where(RecalibrationSchedule.topology_id == topology_id)
    )
    if row is None:
        raise NotFound(f"topology {topology_id} has no recalibration schedule")
    return row


def delete_schedule(session: Session, *, topology_id: int) -> None:
    session.delete(get_schedule(session, topology_id=topology_id))
    session.flush()


def enabled_schedules(session: Session) -> list[RecalibrationSchedule]:
    return list(
        session.scalars(
            select(RecalibrationSchedule)
            .where(RecalibrationSchedule.enabled.is_(True))
            .order_by(RecalibrationSchedule.id)
        )
    )


def next_run(schedule: RecalibrationSchedule) -> datetime:
    base = schedule.last_run_at or schedule.created_at
    return croniter(schedule.cron, base).get_next(datetime)


def calibration_history(session: Session, *, topology_id: int) -> list[dict[str, Any]]:
    """Every finished calibration of the topology, newest first, with what it recommended."""
    get_topology(session, topology_id=topology_id)
    campaigns = session.scalars(
        select(Campaign)
        .where(Campaign.topology_id == topology_id, Campaign.state == "done")
        .order_by(Campaign.finished_at.desc(), Campaign.id.desc())
    )
    out = []
    for c in campaigns:
        rec = calibrated_recommendation_of(session, campaign_id=c.id)
        out.append(
            {
                "campaign_id": c.id,
                "reason": c.reason,
                "finished_at": c.finished_at,
                "recommendation_id": rec.id if rec else None,
                "opm": rec.opm if rec else None,
                "occ": rec.occ if rec else None,
                "obs_mib": rec.obs_mib if rec else None,
                "otp_mbps": rec.otp_mbps if rec else None,
                **timeline(session, campaign=c),
            }
        )
    return out


NOTICED = ("warm_drifted", "path_changed")  # the recalibration saw the path change


def timeline(session: Session, *, campaign: Campaign) -> dict[str, Any]:
    """When a recalibration started, noticed a change (its warm check drifted, or a failover
    queued it), answered (finished), and what became of the re-apply of its answer."""
    events = list(session.scalars(select(RecalibrationEvent).where(
        RecalibrationEvent.campaign_id == campaign.id).order_by(RecalibrationEvent.id)))
    noticed = next((e.created_at for e in events if e.kind in NOTICED), None)
    reapply = None
    for e in events:
        if e.kind == "reapply_refused":
            reapply = {"apply_id": None, "state": "refused", "error": (e.after or {}).get("error"),
                       "started_at": e.created_at, "finished_at": None}
        elif e.kind == "reapply_started":
            row = session.get(AppliedAnswer, (e.after or {}).get("apply_id"))
            reapply = {"apply_id": None if row is None else row.id,
                       "state": "gone" if row is None else row.state, "error":
                       None if row is None else row.error, "started_at": e.created_at,
                       "finished_at": None if row is None else row.finished_at}
    return {"started_at": campaign.started_at, "noticed_at": noticed, "reapply": reapply}


def previous_calibration(session: Session, *, campaign: Campaign) -> Campaign | None:
    """The topology's finished campaign just before `campaign`."""
    return session.scalar(
        select(Campaign)
        .where(
            Campaign.topology_id == campaign.topology_id,
            Campaign.state == "done",
            Campaign.id < campaign.id,
        )
        .order_by(Campaign.id.desc())
        .limit(1)
    )


def add_event(
    session: Session,
    *,
    campaign: Campaign,
    previous_campaign_id: int | None,
    kind: str,
    subject: str,
    before: Any,
    after: Any,
    change_pct: float | None = None,
) -> RecalibrationEvent:
    """Record one change between `campaign` and an earlier calibration of its topology (the
    one place these rows are built: the scheduled comparison and the warm check both call it)."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown recalibration event kind {kind!r}")
    event = RecalibrationEvent(
        topology_id=campaign.topology_id,
        campaign_id=campaign.id,
        previous_campaign_id=previous_campaign_id,
        kind=kind,
        subject=subject[:SUBJECT_MAX],
        before=before,
        after=after,
        change_pct=change_pct,
        created_at=utcnow(),
    )
    session.add(event)
    session.flush()
    return event


def list_events(
    session: Session, *, topology_id: int, limit: int = 100, offset: int = 0
) -> list[RecalibrationEvent]:
    get_topology(session, topology_id=topology_id)
    return list(
        session.scalars(
            select(RecalibrationEvent)
            .where(RecalibrationEvent.topology_id == topology_id)
            .order_by(RecalibrationEvent.id.desc())
            .limit(limit)
            .offset(offset)
        )
    )
