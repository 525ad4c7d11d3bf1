"""Applying a recalibration's new answer where the operator asked for it.

An apply made with ``auto_reapply`` (API body, ``mpcoa apply --auto-reapply``) that is in force
when a recalibration of its topology (a schedule's, or one a failover queued) finishes with a new
answer is followed by a new apply of that answer: `flows.applying.apply.start_apply`, the same
function an operator's apply goes through, so the same plan and safety rules hold (measured
answers only, the buffer bounds, one apply or rollback of a topology at a time under its lock,
the sites' journals, the confirmation and watchers as the replaced apply asked). A warm check that
confirmed the last answer gives no new answer and changes nothing. ``reapply_on_recalibration``
false: never.

Each recalibration is re-applied at most once: the ``reapply_started`` event (with the new apply's
id) or ``reapply_refused`` (with the refusal) marks it. Callers: the runner right after the
campaign finished (embedded) or the task that finished it (Celery), and every scheduler tick (a
process that died in between); a topology busy applying or rolling back is tried again then.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from models import AppliedAnswer, Campaign
from models.history import RecalibrationEvent

from ...db import session_scope
from ...errors import ServiceError
from ...settings import Settings
from ...state import state_of
from ...store import applied, schedules
from ..applying import apply as apply_flow
from ..campaign.finish import RECALIBRATING, Finished

log = logging.getLogger(__name__)

#: the campaigns that recalibrate (a user's own calibration is the user's to apply)
REASONS = RECALIBRATING
MARKS = ("reapply_started", "reapply_refused")


def in_force(session: Session, topology_id: int) -> AppliedAnswer | None:
    """The topology's apply in force, if it is applied and asked for re-applies."""
    for row in applied.list_applies(session, topology_id=topology_id, limit=20):
        if apply_flow._superseded_failure(row):
            continue  # the previous apply is still in force: look further back
        ok = row.state == "applied" and (row.plan or {}).get("auto_reapply")
        return row if ok else None
    return None


def _newest_recalibration(session: Session, topology_id: int, since: datetime) -> Campaign | None:
    campaign = session.scalar(
        select(Campaign).where(Campaign.topology_id == topology_id, Campaign.state == "done")
        .order_by(Campaign.id.desc()).limit(1))
    if (campaign is None or campaign.reason not in REASONS or campaign.finished_at is None
            or campaign.finished_at <= since or campaign.recommendation_id is None):
        return None
    warm = state_of(campaign).warm
    return None if warm is not None and warm.verdict == "warm_confirmed" else campaign


def _marked(session: Session, campaign_id: int) -> bool:
    return session.scalar(select(RecalibrationEvent.id).where(
        RecalibrationEvent.campaign_id == campaign_id,
        RecalibrationEvent.kind.in_(MARKS)).limit(1)) is not None


def reapply_due(session: Session, *, settings: Settings,
                topology_ids: list[int] | None = None) -> list[tuple[int, dict]]:
    """Start the re-applies owed; (apply id, plan) of each, to dispatch once committed
    (`dispatch_all`)."""
    if not settings.reapply_on_recalibration:
        return []
    if topology_ids is None:
        topology_ids = list(session.scalars(select(AppliedAnswer.topology_id).where(
            AppliedAnswer.state == "applied").distinct()))
    started = []
    for topology_id in topology_ids:
        try:
            with session.begin_nested():
                row = _reapply_one(session, topology_id, settings)
        except Exception:  # one topology's trouble must not stop the others
            log.exception("topology %s: the re-apply failed to start", topology_id)
            continue
        if row is not None:
            started.append((row.id, row.plan))
    return started


def _reapply_one(session: Session, topology_id: int, settings: Settings) -> AppliedAnswer | None:
    # under the topology's lock (as every apply): two callers must not both find it owed
    applied.lock_topology(session, topology_id=topology_id)
    old = in_force(session, topology_id)
    if old is None:
        return None
    campaign = _newest_recalibration(session, topology_id, old.created_at)
    if campaign is None or campaign.recommendation_id == old.recommendation_id \
            or _marked(session, campaign.id):
        return None
    if applied.busy_apply(session, topology_id=topology_id, states=tuple(apply_flow.BUSY)):
        return None  # tried again at the next tick
    plan = old.plan
    try:
        row = apply_flow.start_apply(
            session, topology_id=topology_id,
            confirm=bool(plan.get("confirm", {}).get("wanted", True)),
            seconds=float(plan.get("confirm", {}).get("seconds", 10.0)),
            watch=bool(plan.get("watch", {}).get("wanted", True)),
            hold_s=float(plan.get("watch", {}).get("hold_s", 10.0)),
            site_hosts=bool(settings.broker_url), auto_reapply=True,
            lower_ceilings=bool(plan.get("lower_ceilings", False)),
            reapply_of={"campaign_id": campaign.id, "previous_apply_id": old.id})
    except ServiceError as exc:  # unmeasured, no plan for the sites: said, the old one stays
        schedules.add_event(session, campaign=campaign, previous_campaign_id=None,
                            kind="reapply_refused", subject=f"apply {old.id} stays in force",
                            before=old.recommendation_id, after={"error": exc.message})
        return None
    schedules.add_event(session, campaign=campaign, previous_campaign_id=None,
                        kind="reapply_started", subject=f"apply {old.id} -> apply {row.id}",
                        before=old.recommendation_id,
                        after={"apply_id": row.id, "recommendation_id": row.recommendation_id})
    log.info("topology %s: recalibration %s's answer re-applied as apply %s (replacing %s)",
             topology_id, campaign.id, row.id, old.id)
    return row


def dispatch_all(started: list[tuple[int, dict]], settings: Settings, *,
                 engine: Engine | None = None) -> None:
    """Hand the committed re-applies to the sites (owed, and swept, if that fails)."""
    for apply_id, plan in started:
        try:
            apply_flow.dispatch(apply_id, plan, "apply", settings, engine=engine)
        except Exception:
            log.exception("apply %s: the hand-over failed; the sweeper sends it", apply_id)


def after_campaign(campaign_id: int, settings: Settings, *,
                   engine: Engine | None = None) -> list[int]:
    """Right after a campaign finished: its topology's re-apply, if one is owed (dispatched)."""
    with session_scope(engine) as s:
        campaign = s.get(Campaign, campaign_id)
        if campaign is None or campaign.reason not in REASONS:
            return []
        started = reapply_due(s, settings=settings, topology_ids=[campaign.topology_id])
    dispatch_all(started, settings, engine=engine)
    return [apply_id for apply_id, _plan in started]


def after_finish(finished: Finished, settings: Settings, *,
                 engine: Engine | None = None) -> list[int]:
    """What an executor does with a finished campaign's events (`finish.Finished`): a
    recalibration's re-apply, where one is owed (`after_campaign`)."""
    due = finished.reapply_due
    return [] if due is None else after_campaign(due.campaign_id, settings, engine=engine)
