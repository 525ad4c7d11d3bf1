"""Scheduled recalibration: queue the campaigns whose cron schedule is due, and after each
calibration record what changed worth an operator's look (OPM or OCC changed, OBS moved by more
than 10 %, an impact factor changed sign)."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.orm import Session

from models import Campaign, utcnow
from models.history import RecalibrationEvent

from ..algorithm.impact import sign_flipped
from ..settings import Settings
from ..store import campaigns as campaign_store
from ..store import recommendations, results, schedules
from . import warm
from .dispatch import start_campaign
from .plan import CampaignParameters

log = logging.getLogger(__name__)

OBS_MOVE_THRESHOLD = 0.10


def queue_due_campaigns(
    session: Session, *, settings: Settings, now: datetime | None = None
) -> list[int]:
    """A campaign for every enabled schedule that is due and whose topology is not busy.

    Each schedule runs in a savepoint of its own: one that fails (a cron stored before it was
    checked that never fires, a plan too large, a race on the one-active-campaign index) is
    logged and skipped, and the others are still queued (one bad cron must not stop the others).
    """
    now = now or utcnow()
    queued = []
    for schedule in schedules.enabled_schedules(session):
        topology_id = schedule.topology_id
        try:
            with session.begin_nested():
                campaign_id = _queue_if_due(session, schedule, settings, now)
        except Exception:
            log.exception("recalibration of topology %s skipped: its schedule failed", topology_id)
            continue
        if campaign_id is not None:
            queued.append(campaign_id)
    session.flush()
    return queued


def _queue_if_due(session: Session, schedule, settings: Settings, now: datetime) -> int | None:
    due = schedules.next_run(schedule) <= now
    if not due or campaign_store.active_campaign(session, topology_id=schedule.topology_id):
        return None
    campaign = start_campaign(
        session,
        topology_id=schedule.topology_id,
        params=CampaignParameters.model_validate(schedule.parameters or {}),
        reason="scheduled",
        settings=settings,
    )
    if settings.warm_recalibration:
        warm.start_warm(session, campaign=campaign)
    schedule.last_run_at, schedule.last_campaign_id = now, campaign.id
    session.flush()
    return campaign.id


def record_events(session: Session, *, campaign: Campaign) -> list[RecalibrationEvent]:
    """Compare a finished calibration with the previous one of its topology."""
    previous = schedules.previous_calibration(session, campaign=campaign)
    if previous is None:
        return []
    events: list[RecalibrationEvent] = []

    def add(kind: str, subject: str, before, after, change_pct=None) -> None:
        events.append(schedules.add_event(
            session, campaign=campaign, previous_campaign_id=previous.id, kind=kind,
            subject=subject, before=before, after=after, change_pct=change_pct))

    new = recommendations.calibrated_recommendation_of(session, campaign_id=campaign.id)
    old = recommendations.calibrated_recommendation_of(session, campaign_id=previous.id)
    if new is not None and old is not None:
        if new.opm != old.opm:
            add("opm_changed", "opm", old.opm, new.opm)
        if new.occ != old.occ:
            add("occ_changed", "occ", old.occ, new.occ)
        moved = _relative_move(old.obs_mib, new.obs_mib)
        if moved is not None and abs(moved) > OBS_MOVE_THRESHOLD:
            add("obs_moved", "obs_mib", old.obs_mib, new.obs_mib, 100.0 * moved)
    before = results.omegas_of(session, campaign_id=previous.id)
    for key, omega in results.omegas_of(session, campaign_id=campaign.id).items():
        if key in before and sign_flipped(before[key], omega):
            add("omega_sign_changed", f"{key[0]}/{key[1]}", before[key], omega)
    return events


def _relative_move(old: float | None, new: float | None) -> float | None:
    if not old or new is None:
        return None
    return (new - old) / old
