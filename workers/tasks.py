"""Celery tasks: thin wrappers around `service.flows`, which does the work.

advance_campaign(id)  -> does what needs no probe, claims the next step and sends run_probe,
                         or finishes the campaign (flows.finish) when nothing is left to measure
run_probe(id, step)   -> measures (outside any DB transaction), stores, releases, advances
resume_campaigns()    -> re-advances running campaigns whose lease expired (killed worker)
recalibrate_due()     -> queues the campaigns whose cron schedule is due (beat)
"""

from __future__ import annotations

import logging

from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy.exc import OperationalError

from probes.base import ProbeError
from service.db import session_scope
from service.flows import calibration, recalibration
from service.flows.finish import finish_campaign
from service.flows.plan import ProbeStep
from service.flows.probing import default_prober_factory
from service.settings import get_settings
from service.store import campaigns as campaign_store
from service.store import inventory

from .app import CONTROL_QUEUE, app, site_queue

log = logging.getLogger(__name__)

# A database or broker restart mid-campaign: the task is retried until the service is back.
TRANSIENT = (OperationalError,)


def _sites(campaign_id: int) -> tuple[str, str]:
    with session_scope() as s:
        campaign = campaign_store.get_campaign(s, campaign_id=campaign_id)
        topo = inventory.get_topology(s, topology_id=campaign.topology_id)
        return topo.local_site.name, topo.remote_site.name


def _prober(campaign_id: int):
    return default_prober_factory(get_settings())(*_sites(campaign_id))


def send_advance(campaign_id: int, countdown: float | None = None) -> None:
    local, _ = _sites(campaign_id)
    advance_campaign.apply_async((campaign_id,), queue=site_queue(local), countdown=countdown)


@app.task(
    name="mpcoa.advance_campaign",
    bind=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,
)
def advance_campaign(self, campaign_id: int) -> str:
    try:
        with session_scope() as s:
            advance = calibration.next_step(s, campaign_id=campaign_id, prober=_prober(campaign_id))
            if advance.finish:
                finish_campaign(s, campaign_id=campaign_id)
            step = advance.step
            if step is None:
                return "finished"
            lease = calibration.claim(s, campaign_id=campaign_id, step=step)
    except ProbeError as exc:  # no testbed for the sites, ...: the campaign cannot run
        with session_scope() as s:
            calibration.fail_campaign(s, campaign_id=campaign_id, why=str(exc))
        return "failed"
    if lease is None:
        return "busy"  # another run_probe holds the campaign; it advances when it is done
    local, _ = _sites(campaign_id)
    run_probe.apply_async((campaign_id, step.to_dict(), lease), queue=site_queue(local))
    return f"sent {step.describe()}"


@app.task(
    name="mpcoa.run_probe",
    bind=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,
)
def run_probe(self, campaign_id: int, step_data: dict, lease: str) -> str:
    settings = get_settings()
    step = ProbeStep.from_dict(step_data)
    with session_scope() as s:
        request = calibration.pending_request(s, campaign_id=campaign_id, step=step)
    if request is not None:
        try:
            result = _prober(campaign_id).measure(request)
        except Exception as exc:  # any crash of a probe is a failed probe, never a stuck campaign
            if not isinstance(exc, ProbeError):
                log.exception("campaign %s: probe crashed", campaign_id)
            retries = self.request.retries
            if retries < settings.probe_retries:
                countdown = get_exponential_backoff_interval(
                    factor=settings.probe_retry_backoff_s,
                    retries=retries,
                    maximum=60,
                    full_jitter=False,
                )
                raise self.retry(
                    exc=exc, countdown=countdown, max_retries=settings.probe_retries
                ) from exc
            with session_scope() as s:
                calibration.record_failure(
                    s,
                    campaign_id=campaign_id,
                    step=step,
                    error=f"{exc} (after {retries + 1} attempts)",
                )
        else:
            with session_scope() as s:
                calibration.store_result(s, campaign_id=campaign_id, step=step, result=result)
    with session_scope() as s:
        still_ours = calibration.release(s, campaign_id=campaign_id, lease_id=lease)
    if still_ours:
        send_advance(campaign_id)
    return step.describe()


@app.task(
    name="mpcoa.resume_campaigns", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def resume_campaigns() -> list[int]:
    """Advance every queued/running campaign that no live lease holds."""
    with session_scope() as s:
        ids = campaign_store.unleased_campaign_ids(s)
    for cid in ids:
        send_advance(cid)
    return ids


@app.task(
    name="mpcoa.recalibrate_due", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def recalibrate_due() -> list[int]:
    """Beat: a new campaign for every topology whose recalibration schedule is due (each is
    dispatched to its site's queue once the transaction commits)."""
    with session_scope() as s:
        return recalibration.queue_due_campaigns(s, settings=get_settings())


__all__ = ["CONTROL_QUEUE", "advance_campaign", "recalibrate_due", "resume_campaigns", "run_probe"]
