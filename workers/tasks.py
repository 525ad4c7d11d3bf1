"""Celery tasks: thin wrappers around `service.flows`, which does the work. The two campaign
tasks are a scheduling shim around the executor protocol (`flows.campaign.executor`), as the
in-process runner is: they schedule the next turn as a message, wait for busy sites with a countdown
and retry a failed probe as a task retry.

advance_campaign(id)  -> one turn: does what needs no probe, claims the next step and sends
                         run_probe, or finishes the campaign when nothing is left to measure
run_probe(id, step)   -> measures (outside any DB transaction), stores, releases, advances;
                         at a real site it runs the active half and sends serve_probe
serve_probe(...)      -> a real receiver site's passive half of a two-sided probe
resume_campaigns()    -> hands on campaigns a killed worker left (a lease that ran out, a turn
                         nobody took) and sends the hand-overs still owed (broker down): the
                         outbox sweeper
resume_applies()      -> the applies' sweeper: sends the apply hand-overs still owed, at a
                         worker's start sends every apply in flight again, settles one past
                         its deadline from the sites' journals (`flows.applying.apply_outbox`)
recalibrate_due()     -> queues the campaigns whose cron schedule is due (beat)
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import OperationalError

from service.db import session_scope
from service.flows.campaign import dispatch, executor, site_probe, twosided
from service.flows.campaign.plan import ProbeStep
from service.flows.campaign.probing import default_prober_factory
from service.flows.scheduling import reapply, recalibration
from service.settings import get_settings
from service.store import dispatch_outbox

from .app import CONTROL_QUEUE, app, site_queue
from .site import local_site

log = logging.getLogger(__name__)

# A database or broker restart mid-campaign: the task is retried until the service is back.
TRANSIENT = (OperationalError,)
SITE_BUSY_RETRY_S = 2.0  # a campaign waiting for a site another campaign is probing


def _prober(sites: tuple[str, str]):
    site = local_site()
    if site is not None:  # a real site's worker: its own kernel, probes run two-sided
        return twosided.SiteProber(site)
    return default_prober_factory(get_settings())(*sites)


def send_advance(campaign_id: int, local: str) -> None:
    """Hand the campaign to its sender site's (`local`) queue now, or leave the hand-over owed
    (broker down) for the sweeper: the outbox of `flows.campaign.dispatch`."""
    if dispatch.hand_over(campaign_id, local, get_settings()):
        with session_scope() as s:
            dispatch_outbox.mark_dispatched(s, campaign_id=campaign_id)


@app.task(
    name="mpcoa.advance_campaign",
    bind=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,
)
def advance_campaign(self, campaign_id: int) -> str:
    """One turn (`executor.advance_once`); the claimed step goes to run_probe."""
    sites = executor.site_names(None, campaign_id)  # read once for the turn
    turn = executor.advance_once(
        None, campaign_id=campaign_id, prober=_prober(sites), settings=get_settings()
    )
    if turn.step is None:
        if turn.finished is not None:  # a recalibration's new answer, applied where asked
            reapply.after_finish(turn.finished, get_settings())
        return turn.state
    local = sites[0]
    if turn.lease is None:
        if turn.held:  # another run_probe holds the campaign; it advances it when it is done
            return "busy"
        # One of its sites is busy with another campaign's probe, or it gives way to a busier
        # site's campaign (the fleet policy): ask again shortly.
        if dispatch.hand_over(campaign_id, local, get_settings(),
                              countdown_s=SITE_BUSY_RETRY_S):
            # a fresh hand-over: the sweeper re-sends only turns nobody took for a while
            with session_scope() as s:
                dispatch_outbox.mark_dispatched(s, campaign_id=campaign_id)
        return "sites busy"
    run_probe.apply_async((campaign_id, turn.step.to_dict(), turn.lease, turn.owner),
                          queue=site_queue(local))
    return f"sent {turn.step.describe()}"


@app.task(
    name="mpcoa.run_probe",
    bind=True,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,
)
def run_probe(self, campaign_id: int, step_data: dict, lease: str,
              owner: str | None = None) -> str:
    """One attempt of a step (`executor.run_step`) under the lease handed on as `owner`; a
    failed probe is retried as this task with its countdown, holding the lease; then the lease
    is released and the next turn sent. A second copy of this message (the broker redelivered
    it while the first still runs) finds the lease taken and leaves it alone."""
    settings = get_settings()
    step = ProbeStep.from_dict(step_data)
    sites = executor.site_names(None, campaign_id)  # read once for the probe
    outcome = executor.run_step(
        None, campaign_id=campaign_id, step=step, lease=lease, owner=owner,
        measure=lambda request: _measure(self, campaign_id, sites, step, request, lease,
                                         settings),
        settings=settings, attempt=self.request.retries,
    )
    if outcome.lost:
        return f"{step.describe()}: the lease is another's"
    if outcome.retry_in_s is not None:
        raise self.retry(countdown=outcome.retry_in_s, max_retries=settings.probe_retries)
    if executor.release(None, campaign_id=campaign_id, lease=lease, owner=owner,
                        owe_turn=True):
        send_advance(campaign_id, sites[0])
    return step.describe()


def foreign_site(site: str, what: str) -> str | None:
    """Why this worker must not run `what` for `site` (`site_probe.refusal`), or None."""
    return site_probe.refusal(local_site(), site, what)


def _measure(task, campaign_id: int, sites: tuple[str, str], step: ProbeStep, request,
             lease: str, settings):
    def send_passive(key: str, tool: str) -> None:  # to the receiving site's queue
        serve_probe.apply_async((campaign_id, step.to_dict(), lease, key, tool),
                                queue=site_queue(sites[1]))

    return site_probe.measure(campaign_id=campaign_id, step=step, request=request, lease=lease,
                              site=local_site(), settings=settings,
                              prober=lambda: _prober(sites), send_passive=send_passive)


@app.task(
    name="mpcoa.serve_probe",
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,
)
def serve_probe(campaign_id: int, step_data: dict, lease: str, key: str,
                tool: str | None = None) -> str:
    """The receiver site's passive half of one two-sided probe attempt on `tool`
    (`flows.campaign.site_probe.serve`)."""
    step = ProbeStep.from_dict(step_data)
    with session_scope() as s:
        request = executor.pending_request(s, campaign_id=campaign_id, step=step)
    if request is None:
        return "nothing to serve"
    return site_probe.serve(campaign_id=campaign_id, request=request, lease=lease, key=key,
                            tool=tool, site=local_site(), settings=get_settings())


@app.task(
    name="mpcoa.resume_campaigns", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def resume_campaigns() -> dict[str, list[int]]:
    """Beat (and every worker at start): hand on the campaigns a dead worker left (its lease
    ran out, or it took the turn and died before claiming a probe), then send the hand-overs
    still owed (the broker was down). A turn waiting in its queue for under `lease_ttl_s` is
    left alone."""
    settings = get_settings()
    with session_scope() as s:
        recovered = dispatch.recover_stalled(s, settings=settings)
    with session_scope() as s:
        sent = dispatch.send_owed(s, settings=settings)
    return {"recovered": recovered, "sent": sent}


@app.task(
    name="mpcoa.resume_applies", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def resume_applies(at_start: bool = False) -> dict[str, list[int]]:
    """Beat, and every worker at its start (`at_start`: the applies in flight are sent again,
    the killed worker's among them): `apply_outbox.sweep`."""
    from service.flows.applying import apply_outbox

    return apply_outbox.sweep(get_settings(), at_start=at_start)


@app.task(
    name="mpcoa.recalibrate_due", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None
)
def recalibrate_due() -> list[int]:
    """Beat: a new campaign for every topology whose recalibration schedule is due (each is
    dispatched to its site's queue once the transaction commits)."""
    settings = get_settings()
    with session_scope() as s:
        queued = recalibration.queue_due_campaigns(s, settings=settings)
    with session_scope() as s:  # a recalibration's answer the finishing task did not re-apply
        started = reapply.reapply_due(s, settings=settings)
    reapply.dispatch_all(started, settings)
    return queued


@app.task(
    name="mpcoa.apply_site", autoretry_for=TRANSIENT, retry_backoff=True, max_retries=None,
    acks_late=True,
)
def apply_site(apply_id: int, site: str, action: str) -> str:
    """A site's side of an apply, a rollback, a revert (another site refused the apply) or a
    watch (`flows.applying.apply`, `flows.applying.failover_watch`), on the site's own queue: a real
    site's worker changes its own host, the testbed's worker the site's namespace. A worker killed
    mid-apply gets the task again: the journal rolls the site back first. `watch` starts the site's
    failover watcher as this worker's child."""
    from service.flows.applying import apply as apply_flow
    from service.flows.applying import apply_outbox, failover_watch

    if (refused := foreign_site(site, f"{action} of apply {apply_id}")) is not None:
        return refused
    where = None if local_site() is not None else "plan"
    if action == "watch":  # the watcher is this worker's child: it dies with the worker
        watcher = failover_watch.start(apply_id, site, namespace=where)
        return "watching" if watcher is not None else "not watching"
    try:
        if action == "rollback":
            return apply_flow.rollback_site(apply_id, site, namespace=where)["state"]
        if action == "revert":  # another site refused this apply: back to the previous one
            return apply_flow.revert_site(apply_id, site, namespace=where)["state"]
        report = apply_flow.apply_site(apply_id, site, namespace=where)
        if report["state"] == "applied":
            apply_flow.confirm_when_both_applied(apply_id)
            apply_flow.watch_when_applied(apply_id, get_settings())
        return report["state"]
    except TRANSIENT:
        raise
    except Exception as exc:  # not for a retry: settled from the journals now, not stuck
        apply_outbox.fail_now(apply_id, f"{site}: the {action} failed: {exc}", get_settings())
        raise


__all__ = [
    "CONTROL_QUEUE", "advance_campaign", "apply_site", "recalibrate_due", "resume_applies",
    "resume_campaigns", "run_probe", "serve_probe",
]
