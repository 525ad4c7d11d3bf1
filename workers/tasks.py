"""Celery tasks: thin wrappers around `service.flows`, which does the work.

advance_campaign(id)  -> does what needs no probe, claims the next step and sends run_probe,
                         or finishes the campaign (flows.finish) when nothing is left to measure
run_probe(id, step)   -> measures (outside any DB transaction), stores, releases, advances;
                         at a real site it runs the active half and sends serve_probe
serve_probe(...)      -> a real receiver site's passive half of a two-sided probe
resume_campaigns()    -> hands on campaigns whose lease ran out (killed worker) and sends the
                         hand-overs still owed (broker down): the outbox sweeper
recalibrate_due()     -> queues the campaigns whose cron schedule is due (beat)
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy.exc import OperationalError

from probes.base import ProbeError
from service.db import get_engine, session_scope
from service.flows import calibration, dispatch, recalibration, twosided
from service.flows.finish import finish_campaign
from service.flows.plan import ProbeStep
from service.flows.probing import default_prober_factory
from service.settings import get_settings
from service.store import campaigns as campaign_store
from service.store import inventory

from .app import CONTROL_QUEUE, app, site_queue
from .site import local_site

log = logging.getLogger(__name__)

# A database or broker restart mid-campaign: the task is retried until the service is back.
TRANSIENT = (OperationalError,)
SITE_BUSY_RETRY_S = 2.0  # a campaign waiting for a site another campaign is probing


def _sites(campaign_id: int) -> tuple[str, str]:
    with session_scope() as s:
        campaign = campaign_store.get_campaign(s, campaign_id=campaign_id)
        topo = inventory.get_topology(s, topology_id=campaign.topology_id)
        return topo.local_site.name, topo.remote_site.name


def _prober(campaign_id: int):
    site = local_site()
    if site is not None:  # a real site's worker: its own kernel, probes run two-sided
        return twosided.SiteProber(site)
    return default_prober_factory(get_settings())(*_sites(campaign_id))


def send_advance(campaign_id: int) -> None:
    """Hand the campaign to its sender site's queue now, or leave the hand-over owed (broker
    down) for the sweeper: the outbox of `flows.dispatch`."""
    settings = get_settings()
    local, _ = _sites(campaign_id)
    if dispatch.hand_over(campaign_id, local, settings):
        with session_scope() as s:
            campaign_store.mark_dispatched(s, campaign_id=campaign_id)


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
            advance = calibration.next_step(
                s, campaign_id=campaign_id, prober=_prober(campaign_id), settings=get_settings()
            )
            if advance.finish:
                finish_campaign(s, campaign_id=campaign_id)
            step = advance.step
            if step is None:
                return "finished"
            lease = calibration.claim(
                s, campaign_id=campaign_id, step=step, settings=get_settings()
            )
    except ProbeError as exc:  # no testbed for the sites, ...: the campaign cannot run
        with session_scope() as s:
            calibration.fail_campaign(s, campaign_id=campaign_id, why=str(exc))
        return "failed"
    if lease is None:
        with session_scope() as s:
            held = campaign_store.lease_is_live(s, campaign_id=campaign_id)
        if held:  # another run_probe holds the campaign; it advances it when it is done
            return "busy"
        # One of its sites is busy with another campaign's probe, or it gives way to a busier
        # site's campaign (the fleet policy): ask again shortly.
        local, _ = _sites(campaign_id)
        advance_campaign.apply_async(
            (campaign_id,), queue=site_queue(local), countdown=SITE_BUSY_RETRY_S
        )
        return "sites busy"
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
        with calibration.lease_heartbeat(
            get_engine(), campaign_id=campaign_id, lease_id=lease, settings=settings
        ):
            _measure(self, campaign_id, step, request, lease, settings)
    with session_scope() as s:
        still_ours = calibration.release(s, campaign_id=campaign_id, lease_id=lease)
        if still_ours:
            campaign_store.owe_dispatch(campaign_store.get_campaign(s, campaign_id=campaign_id))
    if still_ours:
        send_advance(campaign_id)
    return step.describe()


def _measure(task, campaign_id: int, step: ProbeStep, request, lease: str, settings) -> None:
    """Measure and store; a failing probe is retried with backoff (holding the lease through
    the countdown), then stored as failed."""
    try:
        site = local_site()
        if site is None:  # the emulated testbed: this worker runs both ends
            result = _prober(campaign_id).measure(request)
        else:  # a real site: the receiver site's worker runs the other end
            result = _two_sided(task, campaign_id, step, request, lease, site, settings)
    except Exception as exc:  # any crash of a probe is a failed probe, never a stuck campaign
        if not isinstance(exc, ProbeError):
            log.exception("campaign %s: probe crashed", campaign_id)
        retries = task.request.retries
        if retries < settings.probe_retries:
            countdown = get_exponential_backoff_interval(
                factor=settings.probe_retry_backoff_s, retries=retries, maximum=60,
                full_jitter=False,
            )
            with session_scope() as s:
                campaign_store.renew_lease(
                    s, campaign_id=campaign_id, lease_id=lease,
                    lasts=timedelta(seconds=countdown + settings.lease_ttl_s),
                )
            raise task.retry(
                exc=exc, countdown=countdown, max_retries=settings.probe_retries
            ) from exc
        with session_scope() as s:
            calibration.record_failure(
                s, campaign_id=campaign_id, step=step,
                error=f"{exc} (after {retries + 1} attempts)",
            )
        return
    with session_scope() as s:
        calibration.store_result(s, campaign_id=campaign_id, step=step, result=result)


def _two_sided(task, campaign_id: int, step: ProbeStep, request, lease: str, site, settings):
    key = twosided.session_key(step, task.request.retries)
    _, remote = _sites(campaign_id)

    def send_passive() -> None:
        serve_probe.apply_async((campaign_id, step.to_dict(), lease, key),
                                queue=site_queue(remote))

    return twosided.active_side(campaign_id=campaign_id, lease_id=lease, key=key,
                                request=request, site=site, settings=settings,
                                send_passive=send_passive)


@app.task(
    name="mpcoa.serve_probe",
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,
)
def serve_probe(campaign_id: int, step_data: dict, lease: str, key: str) -> str:
    """The receiver site's passive half of one two-sided probe attempt (`flows.twosided`)."""
    step = ProbeStep.from_dict(step_data)
    with session_scope() as s:
        request = calibration.pending_request(s, campaign_id=campaign_id, step=step)
    if request is None:
        return "nothing to serve"
    site = local_site()
    if site is None:
        from probes.localsite import LocalSite

        site = LocalSite(request.receiver, {})  # fails the session with a clear error below
    try:
        return twosided.passive_side(campaign_id=campaign_id, lease_id=lease, key=key,
                                     request=request, site=site, settings=get_settings())
    except ProbeError as exc:
        return twosided.fail_session(campaign_id=campaign_id, lease_id=lease, key=key,
                                     error=str(exc))


@app.task(
    name="mpcoa.resume_campaigns", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def resume_campaigns() -> dict[str, list[int]]:
    """Beat (and every worker at start): hand on the campaigns whose lease ran out (a worker
    died mid-probe), then send the hand-overs still owed (the broker was down). A campaign
    whose message is waiting in its queue is left alone: nothing is sent twice."""
    settings = get_settings()
    with session_scope() as s:
        recovered = dispatch.recover_stalled(s, settings=settings)
    with session_scope() as s:
        sent = dispatch.send_owed(s, settings=settings)
    return {"recovered": recovered, "sent": sent}


@app.task(
    name="mpcoa.recalibrate_due", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def recalibrate_due() -> list[int]:
    """Beat: a new campaign for every topology whose recalibration schedule is due (each is
    dispatched to its site's queue once the transaction commits)."""
    with session_scope() as s:
        return recalibration.queue_due_campaigns(s, settings=get_settings())


__all__ = [
    "CONTROL_QUEUE", "advance_campaign", "recalibrate_due", "resume_campaigns", "run_probe",
    "serve_probe",
]
