"""Recalibration: queue the campaigns whose cron schedule is due (the one a path change calls for
at once is the failover's own: `applying.path_change`). What changed after each calibration is
`campaign.recalibration_events`' (finishing a campaign records it and never reaches this
module, which starts campaigns)."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.orm import Session

from models import utcnow

from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import schedules
from ..campaign import warm
from ..campaign.dispatch import start_campaign
from ..campaign.plan import CampaignParameters

log = logging.getLogger(__name__)


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
