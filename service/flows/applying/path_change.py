"""A path of an applied answer died (the failover watcher promoted a standby): the topology is
recalibrated now, with its schedule's parameters, and its new answer is applied where the apply
asked for it (`scheduling.reapply`, after the campaign).

The failover's own consequence, so it lives with the watcher (`failover_watch`): applying sits
above the campaign domain and starts the campaign through `dispatch` like any request, and the
scheduling domain, above applying, is never reached from here."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import inventory, schedules
from ..campaign.dispatch import start_campaign
from ..campaign.plan import CampaignParameters

log = logging.getLogger(__name__)


def queue_after_path_change(session: Session, *, topology_id: int, what: dict,
                            settings: Settings) -> int | None:
    """A path of the applied answer died (the failover watcher's `failover` event, `what`):
    a full recalibration now, with the topology's schedule's parameters (no warm check: the
    answer's own path is gone), and a `path_changed` event on it. None, logged, when switched
    off, when the topology has no enabled schedule (nothing says what to probe) or when one of
    its campaigns is under way already."""
    if not settings.recalibrate_on_failover:
        return None
    schedule = next((s for s in schedules.enabled_schedules(session)
                     if s.topology_id == topology_id), None)
    if schedule is None:
        log.info("topology %s: a path changed (%s); no enabled schedule, no recalibration",
                 topology_id, what)
        return None
    inventory.get_topology(session, topology_id=topology_id)
    if campaign_store.active_campaign(session, topology_id=topology_id):
        return None  # the campaign under way measures the changed path already
    campaign = start_campaign(
        session, topology_id=topology_id,
        params=CampaignParameters.model_validate(schedule.parameters or {}),
        reason="path_changed", settings=settings)
    schedules.add_event(session, campaign=campaign, previous_campaign_id=None,
                        kind="path_changed",
                        subject=f"{what.get('site', '?')}: endpoint {what.get('endpoint')} "
                                f"failed, {what.get('promoted')} promoted",
                        before=what.get("endpoint"), after=what)
    session.flush()
    return campaign.id
