"""Creating a campaign and handing it to an executor once its transaction commits.

Executors register here at start-up; dispatch imports none of them:
- 'inprocess' (no broker configured, the embedded default): `flows.runner.install` registers the
  process's background runner.
- 'celery' (MPCOA_BROKER_URL set): the `mpcoa.advance_campaign` task goes to the sender site's
  queue `site.<name>`, sent by name, so the API needs the Celery library but not `workers`.

Sending after the commit matters: a worker must find the campaign row it is told about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache

from sqlalchemy import event
from sqlalchemy.orm import Session

from models import Campaign

from ..settings import Settings
from ..store import campaigns as campaign_store
from ..store import inventory
from .plan import CampaignParameters, checked_probes, resolve

log = logging.getLogger(__name__)

ADVANCE_TASK = "mpcoa.advance_campaign"

Submit = Callable[[int], None]  # campaign id -> runs it eventually
_executors: dict[str, Submit] = {}


def register_executor(name: str, submit: Submit) -> None:
    """An executor announces itself (the in-process runner at start-up)."""
    _executors[name] = submit


def site_queue(site: str) -> str:
    return f"site.{site}"


@lru_cache(maxsize=4)
def _celery_client(broker_url: str):
    from celery import Celery

    return Celery("mpcoa-client", broker=broker_url)


def send_to_celery(campaign_id: int, site: str, broker_url: str) -> None:
    _celery_client(broker_url).send_task(ADVANCE_TASK, args=[campaign_id], queue=site_queue(site))


def start_campaign(
    session: Session,
    *,
    topology_id: int,
    params: CampaignParameters,
    reason: str,
    settings: Settings,
) -> Campaign:
    """The one way to create a campaign: plan it, store it queued, dispatch it after commit."""
    topology = inventory.get_topology(session, topology_id=topology_id)
    plan = resolve(params, settings)
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
        probe_seconds_budget=plan.probe_seconds_budget,
        probes_total=checked_probes(plan, len(topology.subflows)),
        reason=reason,
    )
    dispatch_campaign(session, campaign_id=campaign.id, settings=settings)
    return campaign


def dispatch_campaign(session: Session, *, campaign_id: int, settings: Settings) -> str:
    """Hand campaign `campaign_id` (state 'queued') to the executor once the session commits;
    returns the executor's name."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    campaign.executor = settings.executor
    site = inventory.get_topology(session, topology_id=campaign.topology_id).local_site.name
    session.flush()

    def hand_over(_session: Session) -> None:
        if settings.executor == "celery":
            send_to_celery(campaign_id, site, settings.broker_url)
        elif settings.executor in _executors:
            _executors[settings.executor](campaign_id)
        else:  # it stays queued; the executor resumes queued campaigns when it starts
            log.warning("campaign %s: no %s executor running", campaign_id, settings.executor)
            return
        log.info("campaign %s handed to the %s executor", campaign_id, settings.executor)

    if settings.run_campaigns:
        event.listen(session, "after_commit", hand_over, once=True)
    return campaign.executor
