"""The one place a queued campaign is handed to an executor.

For now this only records how the campaign is to run (the settings' executor: 'inprocess' for the
embedded default, 'celery' with a broker URL). Issue 5 replaces the body: start the in-process
runner, or send the Celery task to the site's queue and store its task id.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from .campaigns import get_campaign
from .settings import Settings, get_settings

log = logging.getLogger(__name__)


def dispatch_campaign(session: Session, campaign_id: int, settings: Settings | None = None) -> str:
    """Hand campaign `campaign_id` (state 'queued') to the executor; returns the executor name."""
    settings = settings or get_settings()
    campaign = get_campaign(session, campaign_id)
    campaign.executor = settings.executor
    session.flush()
    log.info("campaign %s queued for the %s executor", campaign.id, campaign.executor)
    return campaign.executor
