"""The executor protocol: how a campaign advances, once, for every executor.

A turn (`advance_once`): do the work that needs no probe (`calibration.next_step`), finish the
campaign when nothing is left to measure (`flows.finish`), else claim the next step's lease
(`leasing.claim`). A step (`run_step`): the request it needs (none when a redelivery finds its key
stored), the probe under the lease's heartbeat, then its result stored or, after the last
attempt, its failure recorded (`flows.recording`). `release` hands the lease back.

The in-process runner (`flows.runner`) and the Celery tasks (`workers.tasks`) are scheduling
shims around these: they differ only in how they schedule the next turn, wait for busy sites and
retry a failed probe (a sleep in a thread, or a task's countdown).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from probes.base import MeasurementRequest, MeasurementResult, ProbeError, TrafficProfile

from ..algorithm.objective import Objective, objective_of
from ..db import session_scope
from ..settings import Settings
from ..store import campaigns as campaign_store
from ..store import inventory, measurements, sitelocks
from . import calibration, leasing, recording
from .finish import finish_campaign
from .plan import ProbeStep
from .probing import Prober, buffer_bytes
from .timing import lengthened, step_timing

log = logging.getLogger(__name__)

Measure = Callable[[MeasurementRequest], MeasurementResult]


@dataclass(frozen=True)
class Turn:
    """What one turn left: the campaign's state, and the step it claimed (`lease`) or waits
    for (`lease` None: another executor holds the campaign (`held`), or a site is busy or
    given way to a busier site's campaign). No step: the campaign is final."""

    state: str
    step: ProbeStep | None = None
    lease: str | None = None
    held: bool = False


@dataclass(frozen=True)
class Attempt:
    """How one attempt of a step ended: `stored` (its result or its failure), nothing to do
    (`skipped`: a redelivery, or the campaign is final), or `retry_in_s` before the next try."""

    stored: bool = False
    retry_in_s: float | None = None


SKIPPED = Attempt()


def backoff_s(retry: int, factor: float, maximum: float = 60.0) -> float:
    """factor * 2^retry, capped: the same curve as Celery's retry_backoff."""
    return min(maximum, factor * 2**retry)


def site_names(engine: Engine | None, campaign_id: int) -> tuple[str, str]:
    """(sender site, receiver site) of a campaign."""
    with session_scope(engine) as s:
        return campaign_store.site_names(s, campaign_id=campaign_id)


def advance_once(
    engine: Engine | None, *, campaign_id: int, prober: Prober, settings: Settings
) -> Turn:
    """One turn: next_step, finish or claim. A campaign that cannot run (no testbed for its
    sites, ...) is failed with the reason."""
    try:
        with session_scope(engine) as s:
            advance = calibration.next_step(
                s, campaign_id=campaign_id, prober=prober, settings=settings
            )
            if advance.finish:
                finish_campaign(s, campaign_id=campaign_id)
            state = campaign_store.get_campaign(s, campaign_id=campaign_id).state
            if advance.step is None:
                return Turn(state)
            lease = leasing.claim(s, campaign_id=campaign_id, step=advance.step, settings=settings)
            held = lease is None and campaign_store.lease_is_live(s, campaign_id=campaign_id)
            return Turn(state, advance.step, lease, held)
    except ProbeError as exc:
        with session_scope(engine) as s:
            calibration.fail_campaign(s, campaign_id=campaign_id, why=str(exc))
            return Turn(campaign_store.get_campaign(s, campaign_id=campaign_id).state)


def pending_request(
    session: Session, *, campaign_id: int, step: ProbeStep
) -> MeasurementRequest | None:
    """The measurement `step` needs, or None when its key is stored already (a redelivery) or
    the campaign is final. The probe itself runs outside any database transaction."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return None
    if step.key in measurements.done_keys(session, campaign_id=campaign.id):
        return None
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    timing = step_timing(session, campaign, step)
    return MeasurementRequest(
        sender=topology.local_site.name,
        receiver=topology.remote_site.name,
        allowed_subflows=None if step.allowed_subflows is None else list(step.allowed_subflows),
        cc=step.cc,
        buffer_bytes=buffer_bytes(step.bs_mib),
        duration_s=timing.duration_s if lengthened(timing) else campaign.duration_s,
        warmup_s=timing.warmup_s if lengthened(timing) else None,
        path_manager=step.pm,
        profile=profile_of(objective_of(campaign.objective), step.phase),
    )


def profile_of(objective: Objective, phase: str = "buffer") -> TrafficProfile:
    """A stream objective's buffer-phase probes are paced at the stream's frame rate and size.
    The impact and selection phases stay bulk: PCDC's subflows are chosen by goodput, as for
    the bulk objective (a choice by frame delay is not built)."""
    if not objective.is_stream or phase != "buffer":
        return TrafficProfile.bulk()
    return TrafficProfile.paced(objective.rate_hz, objective.frame_bytes,
                                objective.delay_budget_ms)


def run_step(
    engine: Engine | None,
    *,
    campaign_id: int,
    step: ProbeStep,
    lease: str,
    measure: Measure,
    settings: Settings,
    attempt: int = 0,
) -> Attempt:
    """Attempt `attempt` (0 first) of one step under its lease: measure and store; a probe that
    fails is retried after a backoff (`retry_in_s`) until `probe_retries`, then recorded as
    failed. Any crash of a probe is a failed probe, never a stuck campaign."""
    with session_scope(engine) as s:
        request = pending_request(s, campaign_id=campaign_id, step=step)
    if request is None:
        return SKIPPED
    try:
        with leasing.lease_heartbeat(
            engine, campaign_id=campaign_id, lease_id=lease, settings=settings
        ):
            result = measure(request)
    except Exception as exc:
        if not isinstance(exc, ProbeError):
            log.exception("campaign %s: probe crashed", campaign_id)
        log.warning("campaign %s: %s failed (%s)", campaign_id, step.describe(), exc)
        if attempt < settings.probe_retries:
            return Attempt(retry_in_s=backoff_s(attempt, settings.probe_retry_backoff_s))
        with session_scope(engine) as s:
            recording.record_failure(
                s, campaign_id=campaign_id, step=step,
                error=f"{exc} (after {attempt + 1} attempts)",
            )
        return Attempt(stored=True)
    with session_scope(engine) as s:
        recording.store_result(s, campaign_id=campaign_id, step=step, result=result)
    return Attempt(stored=True)


def release(
    engine: Engine | None, *, campaign_id: int, lease: str, owe_turn: bool = False
) -> bool:
    """Hand the lease (and the sites) back; False when someone else holds the campaign now.
    `owe_turn`: a release that is still ours owes the campaign its next turn in the same
    transaction (the outbox of `flows.dispatch`, for executors that send the turn as a message)."""
    with session_scope(engine) as s:
        ours = leasing.release(s, campaign_id=campaign_id, lease_id=lease)
        if ours and owe_turn:
            campaign_store.owe_dispatch(campaign_store.get_campaign(s, campaign_id=campaign_id))
        return ours


def hold(engine: Engine | None, *, campaign_id: int, lease: str, wait_s: float,
         settings: Settings) -> bool:
    """Keep the lease and the sites through a retry's wait of `wait_s` (no heartbeat runs while
    nothing is measured); False when someone else holds the campaign now."""
    lasts = timedelta(seconds=wait_s + settings.lease_ttl_s)
    with session_scope(engine) as s:
        if not campaign_store.renew_lease(s, campaign_id=campaign_id, lease_id=lease, lasts=lasts):
            return False
        sitelocks.renew_sites(s, holder=lease, lasts=lasts)
        return True
