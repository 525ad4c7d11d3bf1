"""Creating a campaign and handing it to an executor once its transaction commits.

Executors register here (`register_executor`); dispatch imports none of them, and every turn is
sent through `hand_over`:
- 'inprocess' (no broker configured, the embedded default): `flows.campaign.runner.install`
registers the
  process's background runner at start-up.
- 'celery' (MPCOA_BROKER_URL set; registered below): the `mpcoa.advance_campaign` task goes to
  the sender site's queue `site.<name>`, sent by name, so the API needs the Celery library but
  not `workers`.

Sending after the commit matters: a worker must find the campaign row it is told about.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from models import Campaign, Topology, utcnow

from ...algorithm.objective import Objective
from ...db import session_scope
from ...messaging import broker_client, site_queue
from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import dispatch_outbox, inventory, probe_lease
from . import budget, probe_tool
from .plan import CampaignParameters, Plan, checked_probes, resolve

log = logging.getLogger(__name__)

ADVANCE_TASK = "mpcoa.advance_campaign"

# (campaign id, sender site, settings, Handing) -> runs the campaign's next turn eventually
Submit = Callable[[int, str, Settings, "Handing"], None]
_executors: dict[str, Submit] = {}


@dataclass(frozen=True)
class Handing:
    """How a turn is sent: `expires_s`, a message not run by then is dropped unrun;
    `countdown_s`, the turn runs no sooner (a campaign whose sites are busy asks again)."""

    expires_s: float | None = None
    countdown_s: float | None = None


def register_executor(name: str, submit: Submit) -> None:
    """An executor announces itself (the in-process runner at start-up, Celery here)."""
    _executors[name] = submit


def send_to_celery(campaign_id: int, site: str, settings: Settings, how: Handing) -> None:
    broker_client(settings.broker_url).send_task(
        ADVANCE_TASK, args=[campaign_id], queue=site_queue(site), expires=how.expires_s,
        countdown=how.countdown_s,
    )


register_executor("celery", send_to_celery)


def start_campaign(
    session: Session,
    *,
    topology_id: int,
    params: CampaignParameters,
    reason: str,
    settings: Settings,
) -> Campaign:
    """A campaign to run: plan it, store it queued, dispatch it after commit (a bundle's
    campaign is inserted finished instead, by `flows.takeaways.bundle_import`)."""
    topology = inventory.get_topology(session, topology_id=topology_id)
    plan, probes_total = plan_for(topology, params, settings)
    probe_tool.refuse_unrunnable(session, topology, plan)
    campaign = campaign_store.add_campaign(
        session,
        topology_id=topology.id,
        ccs=plan.ccs,
        pms=plan.pms,
        buffer_grid_mib=plan.buffer_grid_mib,
        runs=plan.runs,
        duration_s=plan.duration_s,
        delta=plan.delta,
        model_kind=plan.model_kind,
        mode=plan.mode,
        objective=plan.objective.stored() if plan.objective.is_stream else None,
        objective_key=plan.objective.key(),
        probe_tool=plan.probe_tool,
        probe_seconds_budget=plan.probe_seconds_budget,
        seed=secrets.randbelow(2**31),
        probes_total=probes_total,
        reason=reason,
    )
    budget.replan(campaign)  # the probe-second budget per phase, in the notes from the start
    dispatch_campaign(session, campaign_id=campaign.id, settings=settings)
    return campaign



def campaign_for_question(session: Session, topology_id: int, delta: float, settings: Settings,
                          objective: Objective) -> tuple[Campaign, bool]:
    """The campaign a provisional answer promises: the topology's active one, or a new one
    queued with `settings`' defaults for the question's delta and objective; (campaign, queued
    anew). What a request hands `answers.recommend` (its `queue`): queueing is the request
    path's alone."""
    campaign = campaign_store.active_campaign(session, topology_id=topology_id)
    if campaign is not None:
        return campaign, False
    campaign = start_campaign(
        session,
        topology_id=topology_id,
        params=CampaignParameters(delta=delta,
                                  objective=objective if objective.is_stream else None),
        reason="recommendation",
        settings=settings,
    )
    return campaign, True

def plan_for(
    topology: Topology, params: CampaignParameters, settings: Settings
) -> tuple[Plan, int]:
    """The plan `params` make on this topology and its probe count; Invalid (422) when it is too
    large to run. Schedules check their plan with it when they are stored, not when they fire."""
    plan = resolve(params, settings, [(sf.bandwidth_kbps, sf.rtt_ms) for sf in topology.subflows])
    return plan, checked_probes(plan, len(topology.subflows))


def hand_over(
    campaign_id: int, site: str, settings: Settings, *, expires_s: float | None = None,
    countdown_s: float | None = None,
) -> bool:
    """Send the campaign's next turn to its executor; True when the executor took it. A broker
    that is down is not an error here: the hand-over stays owed and the sweeper sends it later.
    `expires_s`, `countdown_s`: see `Handing`."""
    submit = _executors.get(settings.executor)
    if submit is None:  # it stays queued; the executor resumes queued campaigns when it starts
        log.warning("campaign %s: no %s executor running", campaign_id, settings.executor)
        return False
    try:
        submit(campaign_id, site, settings, Handing(expires_s, countdown_s))
    except Exception as exc:  # kombu's OperationalError, a refused connection, ...
        log.warning("campaign %s: hand-over to %s failed (%s); the sweeper retries it",
                    campaign_id, settings.executor, exc)
        return False
    log.info("campaign %s handed to the %s executor", campaign_id, settings.executor)
    return True


def _record_hand_over(bind, campaign_id: int) -> None:
    """Mark the hand-over done in a short transaction of its own (the caller's has committed).
    A session bound to a test's connection has no engine to open one with: nothing recorded."""
    if isinstance(bind, Engine):
        with session_scope(bind) as s:
            dispatch_outbox.mark_dispatched(s, campaign_id=campaign_id)


def dispatch_campaign(session: Session, *, campaign_id: int, settings: Settings) -> str:
    """Owe campaign `campaign_id` a hand-over to the executor and send it once the session
    commits (the outbox: `dispatched_at` stays NULL until the executor took it); returns the
    executor's name."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    campaign.executor = settings.executor
    dispatch_outbox.owe_dispatch(campaign)
    site = _sender_site(session, campaign)
    bind = session.get_bind()
    session.flush()

    sent = False

    def after_commit(committed: Session) -> None:
        # SQLAlchemy also calls this when a SAVEPOINT is released (`begin_nested`, as
        # `recalibration.queue_due_campaigns` uses per schedule): the row is not committed yet
        # then, so wait for the outermost commit (an executor was once handed a campaign
        # it could not see, and on SQLite the hand-over's own write waited on our lock).
        nonlocal sent
        if sent or committed.get_nested_transaction() is not None:
            return
        sent = True
        if hand_over(campaign_id, site, settings):
            _record_hand_over(bind, campaign_id)

    if settings.run_campaigns:
        event.listen(session, "after_commit", after_commit)
    return campaign.executor


def _sender_site(session: Session, campaign: Campaign) -> str:
    return campaign_store.site_names(session, campaign_id=campaign.id)[0]


def send_owed(session: Session, *, settings: Settings, now: datetime | None = None) -> list[int]:
    """The sweeper: hand over every active campaign whose hand-over has been owed for
    `redispatch_after_s` (the broker was down); each is sent once and marked."""
    now = now or utcnow()
    before = now - timedelta(seconds=settings.redispatch_after_s)
    sent = []
    for cid in dispatch_outbox.owed_dispatch_campaign_ids(session, before=before):
        campaign = campaign_store.get_campaign(session, campaign_id=cid)
        if hand_over(cid, _sender_site(session, campaign), settings):
            dispatch_outbox.mark_dispatched(session, campaign_id=cid, at=now)
            sent.append(cid)
    return sent


def recover_stalled(
    session: Session, *, settings: Settings, now: datetime | None = None
) -> list[int]:
    """Hand on the campaigns a dead worker left, so another goes on within the lease's time
    to live, not when the broker gives the message back (its visibility timeout):
    - a lease that ran out: the worker died mid-probe; the lease is dropped, the turn re-sent;
    - a Celery hand-over nobody took within `lease_ttl_s`: the worker died after it received
      the turn but before it claimed a probe, so no lease is left to run out. The re-sent turn
      expires after the same time, so a site whose worker was down long runs one of them and
      drops the rest. A turn run twice is harmless: the second finds the lease held or the
      step stored."""
    now = now or utcnow()
    recovered = []
    for cid in probe_lease.expired_lease_campaign_ids(session, now=now):
        campaign = campaign_store.get_campaign(session, campaign_id=cid)
        probe_lease.drop_lease(campaign)
        dispatch_outbox.owe_dispatch(campaign)
        session.flush()
        if hand_over(cid, _sender_site(session, campaign), settings):
            dispatch_outbox.mark_dispatched(session, campaign_id=cid, at=now)
        recovered.append(cid)
    untaken_before = now - timedelta(seconds=settings.lease_ttl_s)
    for cid in dispatch_outbox.untaken_dispatch_campaign_ids(
        session, executor="celery", before=untaken_before
    ):
        campaign = campaign_store.get_campaign(session, campaign_id=cid)
        if hand_over(cid, _sender_site(session, campaign), settings,
                     expires_s=settings.lease_ttl_s):
            dispatch_outbox.mark_dispatched(session, campaign_id=cid, at=now)
            recovered.append(cid)
    return recovered
