"""The one place a queued campaign is handed to an executor, once its transaction commits.

- 'inprocess' (no broker configured, the embedded default): the process-wide background runner
  of `service.runner` works through it.
- 'celery' (MPCOA_BROKER_URL set): the `mpcoa.advance_campaign` task goes to the sender site's
  queue `site.<name>`; that site's worker runs the campaign's probes. The task is sent by name, so
  the API needs the Celery library but not the workers package.

Sending after the commit matters: a worker must find the campaign row it is told about.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from sqlalchemy import event
from sqlalchemy.orm import Session

from .campaigns import get_campaign
from .inventory import get_topology
from .settings import Settings, get_settings

log = logging.getLogger(__name__)

ADVANCE_TASK = "mpcoa.advance_campaign"


def site_queue(site: str) -> str:
    return f"site.{site}"


@lru_cache(maxsize=4)
def _celery_client(broker_url: str):
    from celery import Celery

    return Celery("mpcoa-client", broker=broker_url)


def send_to_celery(campaign_id: int, site: str, broker_url: str) -> None:
    _celery_client(broker_url).send_task(ADVANCE_TASK, args=[campaign_id], queue=site_queue(site))


def dispatch_campaign(session: Session, campaign_id: int, settings: Settings | None = None) -> str:
    """Hand campaign `campaign_id` (state 'queued') to the executor; returns the executor name."""
    settings = settings or get_settings()
    campaign = get_campaign(session, campaign_id)
    campaign.executor = settings.executor
    site = get_topology(session, campaign.topology_id).local_site.name
    session.flush()

    def hand_over(_session: Session) -> None:
        if settings.executor == "celery":
            send_to_celery(campaign_id, site, settings.broker_url)
        else:
            from .runner import executor

            executor(settings).submit(campaign_id)
        log.info("campaign %s handed to the %s executor", campaign_id, settings.executor)

    if settings.run_campaigns:
        event.listen(session, "after_commit", hand_over, once=True)
    return campaign.executor
