"""The executor protocol: how a campaign advances, once, for every executor.

A turn (`advance_once`): do the work that needs no probe (`calibration.next_step`), finish the
campaign when nothing is left to measure (`flows.campaign.finish`: the turn carries what it left
to do, `Turn.finished`, for the executor to act on), else claim the next step's lease
(`leasing.claim`) under the turn's owner token. A step (`run_step`): the request it needs (none
when a redelivery finds its key stored), the lease taken over from that token by this execution
alone, the probe under the lease's heartbeat, then its result stored or, after the last attempt,
its failure recorded (`flows.campaign.recording`), in the transaction that checks the lease is still
this execution's and hands it back to the token. `release` hands the lease back.

The in-process runner (`flows.campaign.runner`) and the Celery tasks (`workers.tasks`) are
scheduling shims around these: they differ only in how they schedule the next turn, wait for busy
sites and retry a failed probe (a sleep in a thread, or a task's countdown).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from models import MeasurementPhase
from probes.base import (
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    ReceiverAbsent,
    TrafficProfile,
)

from ...algorithm.objective import Objective, objective_of
from ...db import session_scope
from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import dispatch_outbox, inventory, measurements, probe_lease
from . import calibration, leasing, recording
from .finish import Finished, finish_campaign
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
    owner: str | None = None  #: the token the lease was claimed under (hand it on with it)
    #: this turn finished the campaign: what it did and left for the executor to hand on
    finished: Finished | None = None


@dataclass(frozen=True)
class Attempt:
    """How one attempt of a step ended: `stored` (its result or its failure), nothing to do
    (`skipped`: a redelivery, or the campaign is final), `retry_in_s` before the next try (the
    lease is held through the wait), `lost`: the lease is another's (a second copy of the
    task runs it, or it ran out and was handed on), so nothing was stored, or
    `receiver_absent`: the receiver site had no worker, so nothing was stored and the step is
    not used up (the lease is handed back; the next turn runs the step again)."""

    stored: bool = False
    retry_in_s: float | None = None
    lost: bool = False
    receiver_absent: bool = False


SKIPPED = Attempt()
LOST = Attempt(lost=True)
ABSENT = Attempt(receiver_absent=True)


def backoff_s(retry: int, factor: float, maximum: float = 60.0) -> float:
    """factor * 2^retry, capped: the same curve as Celery's retry_backoff."""
    return min(maximum, factor * 2**retry)


def site_names(engine: Engine | None, campaign_id: int) -> tuple[str, str]:
    """(sender site, receiver site) of a campaign."""
    with session_scope(engine) as s:
        return campaign_store.site_names(s, campaign_id=campaign_id)


def advance_once(
    engine: Engine | None, *, campaign_id: int, prober: Prober, settings: Settings,
    owner: str | None = None,
) -> Turn:
    """One turn: next_step, finish or claim, the lease claimed under `owner` (a fresh token
    when None). A campaign that cannot run (no testbed for its sites, ...) is failed with the
    reason."""
    owner = owner or probe_lease.new_owner()
    try:
        with session_scope(engine) as s:
            advance = calibration.next_step(
                s, campaign_id=campaign_id, prober=prober, settings=settings
            )
            finished = (finish_campaign(s, campaign_id=campaign_id) if advance.finish
                        else None)
            state = campaign_store.get_campaign(s, campaign_id=campaign_id).state
            if advance.step is None:
                return Turn(state, finished=finished)
            lease = leasing.claim(s, campaign_id=campaign_id, step=advance.step, owner=owner,
                                  settings=settings)
            held = lease is None and probe_lease.lease_is_live(s, campaign_id=campaign_id)
            return Turn(state, advance.step, lease, held, owner)
    except ProbeError as exc:
        with session_scope(engine) as s:
            calibration.fail_campaign(s, campaign_id=campaign_id, why=str(exc))
            return Turn(campaign_store.get_campaign(s, campaign_id=campaign_id).state)


def pending_request(
    session: Session, *, campaign_id: int, step: ProbeStep
) -> MeasurementRequest | None:
    """The measurement `step` needs, or None when its key is stored already (a redelivery) or
    the campaign is final. The probe itself runs outside any database transaction."""
    pending = _pending(session, campaign_id=campaign_id, step=step)
    return None if pending is None else pending[0]


def _pending(
    session: Session, *, campaign_id: int, step: ProbeStep
) -> tuple[MeasurementRequest, dict] | None:
    """`pending_request` with the step's timing (its JSON form), computed once: the request's
    duration and warm-up come from it, and the stored result keeps it."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return None
    if step.key in measurements.done_keys(session, campaign_id=campaign.id):
        return None
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    timing = step_timing(session, campaign, step)
    autotuned = step.phase == MeasurementPhase.AUTOTUNE
    return MeasurementRequest(
        sender=topology.local_site.name,
        receiver=topology.remote_site.name,
        allowed_subflows=None if step.allowed_subflows is None else list(step.allowed_subflows),
        cc=step.cc,
        # an autotune probe sets no buffer: its bs_mib is the ceiling it runs under
        buffer_bytes=None if autotuned else buffer_bytes(step.bs_mib),
        autotune_max_bytes=buffer_bytes(step.bs_mib) if autotuned else None,
        duration_s=timing.duration_s if lengthened(timing) else campaign.duration_s,
        warmup_s=timing.warmup_s if lengthened(timing) else None,
        path_manager=step.pm,
        profile=profile_of(objective_of(campaign.objective), step.phase),
        tool=campaign.probe_tool or "auto",
    ), timing.to_dict()


def profile_of(objective: Objective, phase: str = MeasurementPhase.SWEEP) -> TrafficProfile:
    """A stream objective's buffer-phase and selection probes are paced at the stream's frame
    rate and size: PCDC's subflows are chosen by p99 frame delay (`phases.selection_stream`).
    The impact phase stays bulk (Ω, and the reference CC's order, are goodput's)."""
    if not objective.is_stream or phase not in (MeasurementPhase.SWEEP, "selection"):
        return TrafficProfile.bulk()
    return TrafficProfile.paced(objective.rate_hz, objective.frame_bytes,
                                objective.delay_budget_ms)


def run_step(
    engine: Engine | None,
    *,
    campaign_id: int,
    step: ProbeStep,
    lease: str,
    owner: str | None,
    measure: Measure,
    settings: Settings,
    attempt: int = 0,
) -> Attempt:
    """Attempt `attempt` (0 first) of one step under its lease, handed on as `owner`: take the
    lease over, measure, and store while it is still this execution's; a probe that fails is
    retried after a backoff (`retry_in_s`) until `probe_retries`, then recorded as failed; one
    whose receiver site has no worker (`ReceiverAbsent`) stores nothing, so the step is run
    again at the next turn (`flows.campaign.twosided` bounds that wait). Any crash of a probe is a
    failed probe, never a stuck campaign. However it ends, a lease this
    execution took is handed back to `owner`, for `release` or the next attempt."""
    mine = probe_lease.new_owner()
    with session_scope(engine) as s:
        pending = _pending(s, campaign_id=campaign_id, step=step)
        if pending is None:
            return SKIPPED
        request, timing = pending
        if not probe_lease.take_over(s, campaign_id=campaign_id, lease_id=lease, handed=owner,
                                     owner=mine):
            log.warning("campaign %s: %s not run: its lease is another's", campaign_id,
                        step.describe())
            return LOST
    # A probe's task must end before the broker hands it to a second worker.
    too_long = request.duration_s > settings.longest_probe_s
    error = (f"a probe of {request.duration_s:g} s outlasts the {settings.longest_probe_s:g} s "
             "the broker's redelivery allows (longest_probe_s)") if too_long else None
    absent = False
    if not too_long:
        try:
            with leasing.lease_heartbeat(
                engine, campaign_id=campaign_id, lease_id=lease, owner=mine, settings=settings
            ):
                result = measure(request)
        except ReceiverAbsent as exc:
            log.warning("campaign %s: %s waits for its receiver site (%s)", campaign_id,
                        step.describe(), exc)
            absent = True
        except Exception as exc:
            if not isinstance(exc, ProbeError):
                log.exception("campaign %s: probe crashed", campaign_id)
            log.warning("campaign %s: %s failed (%s)", campaign_id, step.describe(), exc)
            error = f"{exc} (after {attempt + 1} attempts)"
    settle = _Settle(engine, campaign_id, lease, mine, owner, settings)
    if absent:  # not the probe's failure: nothing stored, its retries untouched
        return ABSENT if settle(None) else LOST
    if error is None:
        stored = settle(lambda s: recording.store_result(
            s, campaign_id=campaign_id, step=step, result=result, timing=timing))
    elif attempt < settings.probe_retries and not too_long:
        wait_s = backoff_s(attempt, settings.probe_retry_backoff_s)
        # the lease and the sites are kept through the wait (no heartbeat runs meanwhile)
        return Attempt(retry_in_s=wait_s) if settle(None, wait_s=wait_s) else LOST
    else:
        stored = settle(lambda s: recording.record_failure(
            s, campaign_id=campaign_id, step=step, error=error))
    return Attempt(stored=True) if stored else LOST


@dataclass(frozen=True)
class _Settle:
    """The end of an attempt: in one transaction, check that the lease is still this
    execution's (`mine`), renew it, hand it back to `handed` and write what the attempt leaves.
    A finished probe's result is not thrown away when the database is briefly away: the
    transaction is tried again with a backoff for up to `store_retry_s`."""

    engine: Engine | None
    campaign_id: int
    lease: str
    mine: str
    handed: str | None
    settings: Settings

    def __call__(self, write: Callable[[Session], object] | None, wait_s: float = 0.0) -> bool:
        """True: written under the lease; False: the lease was taken over, nothing written."""
        lasts = timedelta(seconds=wait_s + self.settings.lease_ttl_s)
        deadline = time.monotonic() + self.settings.store_retry_s
        for retry in itertools.count():
            try:
                with session_scope(self.engine) as s:
                    if not leasing.keep(s, campaign_id=self.campaign_id, lease_id=self.lease,
                                        owner=self.mine, lasts=lasts, hand_to=self.handed):
                        log.warning("campaign %s: lease %s was taken over; this attempt "
                                    "stores nothing", self.campaign_id, self.lease)
                        return False
                    if write is not None:
                        write(s)
                return True
            except DBAPIError as exc:
                pause = backoff_s(retry, 0.25, maximum=5.0)
                if not _database_away(exc) or time.monotonic() + pause > deadline:
                    raise
                log.warning("campaign %s: the database is away (%s); storing again in %.1f s",
                            self.campaign_id, exc.orig, pause)
                time.sleep(pause)
        raise AssertionError("unreachable")  # itertools.count() never ends


def _database_away(exc: DBAPIError) -> bool:
    """The server is down, restarting or dropped the connection (not a bad statement)."""
    return exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)


def release(
    engine: Engine | None, *, campaign_id: int, lease: str, owner: str | None,
    owe_turn: bool = False,
) -> bool:
    """Hand the lease (and the sites) back if `owner` has it; False when someone else holds
    the campaign now. `owe_turn`: a release that is still ours owes the campaign its next turn
    in the same transaction (the outbox of `flows.campaign.dispatch`, for executors that send the
    turn as a message)."""
    with session_scope(engine) as s:
        ours = leasing.release(s, campaign_id=campaign_id, lease_id=lease, owner=owner)
        if ours and owe_turn:
            dispatch_outbox.owe_dispatch(campaign_store.get_campaign(s, campaign_id=campaign_id))
        return ours
