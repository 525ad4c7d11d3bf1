"""A calibration campaign, step by step: impact phase -> Omega -> SP* -> buffer sweep -> fit ->
(more runs while the quality gate fails and the budget allows) -> ready to finish.

Every function re-reads the campaign from the database and is idempotent, so the same steps serve
the in-process runner and the Celery tasks, and a campaign resumes wherever it stopped: a step is
done when a measurement with its key exists (status ok, or failed after retries). When nothing is
left to measure, the executor calls `flows.finish.finish_campaign`.

One probe is in flight per campaign at a time: `claim` hands out a lease for the next step under a
row lock and refuses a second one until the lease is released or has expired (a killed worker).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import fmean

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from models import NO_EXCLUSION, Campaign, utcnow
from probes.base import MeasurementRequest, MeasurementResult
from probes.vocabulary import PCDC

from ..algorithm import adaptive
from ..algorithm.impact_confidence import ConfidentImpact, subflows_needing_runs
from ..algorithm.sweep import plateau_extension
from ..db import session_scope
from ..settings import Settings
from ..store import artifacts as artifact_store
from ..store import campaigns as campaign_store
from ..store import inventory, measurements, results, sitelocks
from . import fleet, warm
from .derive import fit_from_runs, impact_from_runs
from .plan import ProbeStep, buffer_steps, impact_steps, planned_probes
from .probing import Prober, buffer_bytes

MAX_EXTRA_ROUNDS_WITHOUT_BUDGET = 2
MAX_GRID_EXTENSIONS = 3

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Advance:
    """What a campaign needs next: a probe, or finishing (`finish`), or nothing (it is final)."""

    step: ProbeStep | None = None
    finish: bool = False


FINAL = Advance()
FINISH = Advance(finish=True)


def next_step(
    session: Session, *, campaign_id: int, prober: Prober, settings: Settings
) -> Advance:
    """Do every piece of work that needs no probe, and say what the campaign needs next."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return FINAL
    if campaign.state == "queued":
        campaign_store.set_state(session, campaign_id=campaign.id, state="running")
    if campaign.active_ccs is None and not _choose_ccs(session, campaign, prober):
        return FINAL
    subflows = topology_subflows(session, campaign)
    done = measurements.done_keys(session, campaign_id=campaign.id)

    if (promises := warm.pending_checks(session, campaign=campaign)) is not None:
        advance = _warm(session, campaign, promises, done, settings)
        if advance is not None:
            return advance

    for step in impact_steps(campaign.active_ccs, impact_runs(campaign), subflows):
        if step.key not in done:
            return _within_budget(session, campaign, step, settings)

    impacts = results.impact_results(session, campaign_id=campaign.id)
    if not set(campaign.active_ccs) <= {r.cc for r in impacts}:
        derived = impact_from_runs(
            session, campaign_id=campaign.id, subflows=subflows,
            confidence=settings.impact_confidence,
        )
        if _more_impact_runs(campaign, derived, len(subflows), settings):
            return next_step(session, campaign_id=campaign_id, prober=prober, settings=settings)
        if not _store_impact(session, campaign, derived):
            return FINAL
        impacts = results.impact_results(session, campaign_id=campaign.id)
    subsets = {r.cc: r.subset for r in impacts}

    if campaign.mode == "adaptive":
        return _adaptive(session, campaign, subsets, subflows, settings)

    if not campaign.budget_exhausted:
        for step in buffer_steps(
            campaign.pms, campaign.active_ccs, campaign.buffer_grid_mib, campaign.runs,
            subsets, subflows, campaign.seed,
        ):
            if step.key not in done:
                return _within_budget(session, campaign, step, settings)

        if _extend_grid(session, campaign):
            return next_step(session, campaign_id=campaign_id, prober=prober, settings=settings)

    fits = _fit(session, campaign)
    if fits is None:
        return FINAL
    if not all(f.gate_passed for f in fits) and _another_round(campaign):
        return next_step(session, campaign_id=campaign_id, prober=prober, settings=settings)
    return FINISH


def _adaptive(
    session: Session, campaign: Campaign, subsets: dict, subflows: list[str], settings: Settings
) -> Advance:
    """Adaptive mode (issue 12): the next probe from `algorithm.adaptive.decide` over what was
    measured, the grid extended upwards while the best arm still climbs at its top; when the
    decision is settled or the budget (or the grid plan's probe count) is spent: fit and finish.
    The answer is read off the measured buffers (`recommend._measured_curves`)."""
    arms = [(pm, cc) for pm in campaign.pms for cc in campaign.active_ccs]
    samples, tried = _buffer_samples(session, campaign)
    cap = len(arms) * len(campaign.buffer_grid_mib) * campaign.runs  # never more than the grid
    decision = None
    while not campaign.budget_exhausted and sum(tried.values()) < cap:
        if _adaptive_climb(campaign, arms, samples):  # the grid grew: the new top first
            continue
        decision = adaptive.decide(arms, campaign.buffer_grid_mib, samples, campaign.delta)
        if decision.settled:
            break
        probe = decision.probes[0]
        done = campaign.probes_done
        campaign.probes_total = max(campaign.probes_total, done + len(decision.probes) + 1)
        allowed = None
        if probe.pm == PCDC and set(subsets[probe.cc]) != set(subflows):
            allowed = tuple(subsets[probe.cc])
        run = tried.get((probe.pm, probe.cc, probe.bs_mib), 0) + 1
        step = ProbeStep("buffer", probe.pm, probe.cc, probe.bs_mib, run, NO_EXCLUSION, allowed)
        return _within_budget(session, campaign, step, settings)
    stop = "settled" if decision is not None and decision.settled else "budget"
    campaign_store.add_note(campaign, "adaptive", {
        "stop": stop, **({} if decision is None else {
            k: getattr(decision, k) for k in (
                "opm", "occ", "obs_mib", "otp_mbps", "otp_half_width_mbps", "t_star_mbps",
                "target_mbps", "survivors", "eliminated")}),
        "confidence": adaptive.DEFAULT_CONFIDENCE,
    })
    campaign.probes_total = campaign.probes_done
    if _fit(session, campaign) is None:
        return FINAL
    return FINISH


def _adaptive_climb(campaign: Campaign, arms, samples) -> bool:
    """The grid extended (True) when the leader at the top still climbs there by more than
    delta (`sweep.plateau_extension`), up to `MAX_GRID_EXTENSIONS` points."""
    means = adaptive.top_pair_means(arms, campaign.buffer_grid_mib, samples)
    added = list((campaign.notes or {}).get("grid_extended", []))
    if means is None or len(added) >= MAX_GRID_EXTENSIONS:
        return False
    more = plateau_extension(campaign.buffer_grid_mib, means, campaign.delta)
    if more is None:
        return False
    _grow_grid(campaign, more)
    return True


def _buffer_samples(session: Session, campaign: Campaign):
    """Per (PM, CC) the ok goodputs per buffer, and per (PM, CC, buffer) the runs stored (ok or
    failed: a failed run's key is taken, the next run gets the next number)."""
    samples: dict[tuple[str, str], dict[float, list[float]]] = {}
    tried: dict[tuple[str, str, float], int] = {}
    for m in measurements.list_buffer_runs(session, campaign_id=campaign.id):
        bs = float(m.bs_mib)
        tried[(m.pm, m.cc, bs)] = max(tried.get((m.pm, m.cc, bs), 0), m.run)
        if m.status == "ok" and m.mean_goodput_mbps is not None:
            samples.setdefault((m.pm, m.cc), {}).setdefault(bs, []).append(m.mean_goodput_mbps)
    return samples, tried


def _warm(session: Session, campaign: Campaign, promises, done, settings) -> Advance | None:
    """A warm recalibration's checks of the last answer (`flows.warm`): their probes, then the
    verdict: confirmed finishes the campaign on the last calibration; drifted returns None and
    the full campaign goes on (its probes added to the progress total)."""
    steps = [step for check in promises for step in check.steps()]
    full = planned_probes(
        len(topology_subflows(session, campaign)), len(campaign.active_ccs), len(campaign.pms),
        len(campaign.buffer_grid_mib), campaign.runs,
    )
    campaign.probes_total = len(steps)
    left = _budget_left(campaign)
    for step in steps:
        if step.key not in done and (left is None or left >= campaign.duration_s):
            return Advance(step=step)
    if warm.judge(session, campaign=campaign, checks_=promises):
        return FINISH
    campaign.probes_total = len(steps) + full
    session.flush()
    return None


def impact_runs(campaign: Campaign) -> dict[str, int]:
    """Impact runs per CC: the plan's, plus those added while an Omega's sign was unsettled."""
    extra = campaign.extra_impact_runs or {}
    return {cc: campaign.impact_runs + extra.get(cc, 0) for cc in campaign.active_ccs}


def _more_impact_runs(
    campaign: Campaign, derived: list[ConfidentImpact], n_subflows: int, settings: Settings
) -> bool:
    """One more impact run for every CC with an Omega whose sign is not settled yet, while more
    runs could settle it, the CC has fewer than `impact_max_runs` and the budget allows."""
    runs = impact_runs(campaign)
    cost = (1 + n_subflows) * campaign.duration_s
    left = _budget_left(campaign)
    if left is not None:  # the buffer sweep's share of the budget is not the impact phase's
        left -= (
            len(campaign.pms) * len(campaign.active_ccs) * len(campaign.buffer_grid_mib)
            * campaign.runs * campaign.duration_s
        )
    extra = dict(campaign.extra_impact_runs or {})
    added = 0
    for result in derived:
        if runs[result.cc] >= settings.impact_max_runs:
            continue
        hopeful = subflows_needing_runs(result, settings.impact_max_runs)
        if not any(total is not None for total in hopeful.values()):
            continue
        if left is not None and left < (added + 1) * cost:
            continue
        extra[result.cc] = extra.get(result.cc, 0) + 1
        added += 1
    if not added:
        return False
    campaign.extra_impact_runs = extra
    campaign.probes_total += added * (1 + n_subflows)
    return True


def topology_subflows(session: Session, campaign: Campaign) -> list[str]:
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    return [sf.name for sf in topology.subflows]


def _choose_ccs(session: Session, campaign: Campaign, prober: Prober) -> bool:
    """The campaign's CCs that both sites offer; the rest are reported as dropped with the reason.

    Both sites' workers reported their capabilities (real sites): the CCs both reports offer.
    Otherwise (the emulated testbed, or a site that has not reported): the prober's view."""
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    reported = artifact_store.reported_ccs(
        session, site_ids=[topology.local_site_id, topology.remote_site_id])
    if len(reported) == 2:
        offered = set.intersection(*(set(v) for v in reported.values()))

        def reason(cc: str) -> str:
            lacking = [name for name, ccs in sorted(reported.items()) if cc not in ccs]
            return f"not offered by site {' and '.join(lacking)} (its worker's capability report)"

        source = "site capability reports"
    else:
        offered = set(prober.available_ccs())

        def reason(cc: str) -> str:
            return "not offered by both sites' kernels (tcp_available_congestion_control)"

        source = "prober"
    log.info("campaign %s: CCs from %s: %s", campaign.id, source, sorted(offered))
    campaign.offered_ccs = sorted(offered)
    campaign.active_ccs = [cc for cc in campaign.ccs if cc in offered]
    campaign.dropped_ccs = {cc: reason(cc) for cc in campaign.ccs if cc not in offered}
    # Extra rounds for the quality gate add buffer runs only: the impact phase keeps its runs.
    campaign.impact_runs = campaign.runs
    n_subflows = len(topology_subflows(session, campaign))
    campaign.probes_total = planned_probes(
        n_subflows, len(campaign.active_ccs), len(campaign.pms),
        len(campaign.buffer_grid_mib), campaign.runs,
    )
    if campaign.mode == "adaptive":  # an estimate: the top, then a bisection, per arm
        arms = len(campaign.active_ccs) * len(campaign.pms)
        steps = 1 + math.ceil(math.log2(len(campaign.buffer_grid_mib)))
        campaign.probes_total = (
            len(campaign.active_ccs) * campaign.runs * (1 + n_subflows)
            + arms * adaptive.MIN_RUNS * steps
        )
    if not campaign.active_ccs:
        _fail(
            session,
            campaign,
            f"none of the campaign's CCs {campaign.ccs} is offered by both "
            f"sites (they offer {sorted(offered)})",
        )
        return False
    session.flush()
    return True


def _within_budget(
    session: Session, campaign: Campaign, step: ProbeStep, settings: Settings
) -> Advance:
    left = _budget_left(campaign)
    if left is None or left >= campaign.duration_s:
        return Advance(step=step)
    if step.phase == "impact":
        _fail(
            session,
            campaign,
            f"probe-seconds budget spent before the impact phase ended "
            f"({campaign.probe_seconds_used:.0f} s used)",
        )
        return FINAL
    campaign.budget_exhausted = True
    session.flush()
    return next_step(session, campaign_id=campaign.id, prober=_NoProber(), settings=settings)


def _budget_left(campaign: Campaign) -> float | None:
    if campaign.probe_seconds_budget is None:
        return None
    return campaign.probe_seconds_budget - campaign.probe_seconds_used


class _NoProber:
    """Past the budget nothing is measured; CCs were chosen already."""

    def available_ccs(self) -> set[str]:
        return set()

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        raise AssertionError("no probe past the budget")


def _store_impact(session: Session, campaign: Campaign, results_: list[ConfidentImpact]) -> bool:
    """Omega and SP* per CC from the impact runs; a CC whose runs all failed is dropped; what
    stayed unsettled is noted (and flagged on the answer)."""
    derived = {r.cc: r for r in results_}
    campaign_store.add_note(
        campaign, "unsettled_omegas", {r.cc: r.unsettled for r in results_ if r.unsettled}
    )
    dropped = dict(campaign.dropped_ccs or {})
    for cc in campaign.active_ccs:
        if cc not in derived:
            dropped[cc] = "impact phase: no usable TP_0 and TP_i runs (all failed)"
    kept = [cc for cc in campaign.active_ccs if cc in derived]
    results.store_impact(session, campaign_id=campaign.id, results=[derived[cc] for cc in kept])
    campaign.active_ccs, campaign.dropped_ccs = kept, dropped
    if not kept:
        _fail(session, campaign, "impact phase: no congestion control has usable runs")
        return False
    session.flush()
    return True


def _extend_grid(session: Session, campaign: Campaign) -> bool:
    """One more buffer above the grid, for every arm and run, while the best arm is still
    climbing at the largest buffer (the plateau T* is read off would be a slope), up to
    `MAX_GRID_EXTENSIONS` points and within the budget; noted (`grid_extended`), and flagged
    when the grid had to stop below the plateau."""
    added = list((campaign.notes or {}).get("grid_extended", []))
    samples, _tried = _buffer_samples(session, campaign)
    arm_means = {arm: {bs: fmean(v) for bs, v in per.items()} for arm, per in samples.items()}
    more = plateau_extension(campaign.buffer_grid_mib, arm_means, campaign.delta)
    if more is None:
        return False
    probes = len(campaign.pms) * len(campaign.active_ccs) * campaign.runs
    left = _budget_left(campaign)
    if len(added) >= MAX_GRID_EXTENSIONS or (
        left is not None and left < probes * campaign.duration_s
    ):
        campaign_store.add_note(campaign, "grid_below_plateau", max(campaign.buffer_grid_mib))
        return False
    _grow_grid(campaign, more)
    campaign.probes_total += probes
    session.flush()
    return True


def _grow_grid(campaign: Campaign, more: float) -> None:
    added = list((campaign.notes or {}).get("grid_extended", []))
    campaign.buffer_grid_mib = sorted([*campaign.buffer_grid_mib, more])
    campaign_store.add_note(campaign, "grid_extended", [*added, more])


def _fit(session: Session, campaign: Campaign):
    """f5 over the ok buffer runs, stored; None (and the campaign failed) when no arm is usable."""
    outcome = fit_from_runs(session, campaign=campaign)
    campaign_store.add_note(campaign, "unfitted_arms", outcome.unfitted_arms)
    if not outcome.fits:
        _fail(session, campaign, "buffer phase: no (PM, CC) has runs at 3 buffer sizes")
        return None
    results.store_fits(session, campaign_id=campaign.id, fits=outcome.fits)
    session.flush()
    return outcome.fits


def _another_round(campaign: Campaign) -> bool:
    """The gate failed: one more run of the whole buffer sweep, if the budget allows it."""
    round_cost = (
        len(campaign.pms) * len(campaign.active_ccs) * len(campaign.buffer_grid_mib)
        * campaign.duration_s
    )
    left = _budget_left(campaign)
    if campaign.budget_exhausted:
        return False
    if left is None and campaign.extra_rounds >= MAX_EXTRA_ROUNDS_WITHOUT_BUDGET:
        return False
    if left is not None and left < round_cost:
        return False
    campaign.extra_rounds += 1
    campaign.runs += 1
    campaign.probes_total += round(round_cost / campaign.duration_s)
    return True


def _fail(session: Session, campaign: Campaign, why: str) -> None:
    campaign_store.set_state(session, campaign_id=campaign.id, state="failed", error=why)


def fail_campaign(session: Session, *, campaign_id: int, why: str) -> None:
    """Stop a campaign that cannot go on (no testbed for its sites, ...), saying why."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if not campaign_store.is_final(campaign):
        if campaign.state == "queued":
            campaign_store.set_state(session, campaign_id=campaign.id, state="running")
        _fail(session, campaign, why)


# --- leases: one probe in flight per campaign ----------------------------------------------------
def claim(
    session: Session, *, campaign_id: int, step: ProbeStep, settings: Settings
) -> str | None:
    """A lease id for running `step`, or None while another live lease holds the campaign or
    another campaign's probe holds one of its two sites. It lasts `lease_ttl_s`;
    `lease_heartbeat` renews it while the probe runs."""
    lasts = timedelta(seconds=settings.lease_ttl_s)
    lease_id = campaign_store.claim_lease(
        session, campaign_id=campaign_id, step_key=list(step.key), lasts=lasts
    )
    if lease_id is None:
        return None
    # issue 11 item 5: a probe also holds both sites' links, across campaigns. Busy sites, or
    # a busier site's campaign that the fleet policy starts first, give the campaign lease back
    # so the executor retries later.
    now = utcnow()
    sites = _site_names(session, campaign_id=campaign_id)
    rival = _gives_way_to(session, campaign_id=campaign_id, now=now, settings=settings)
    if rival is not None or not sitelocks.acquire_sites(
        session, sites=sites, holder=lease_id, lasts=lasts, now=now
    ):
        if rival is not None:
            log.info("campaign %s: gives its sites way to campaign %s", campaign_id, rival)
        campaign_store.release_lease(session, campaign_id=campaign_id, lease_id=lease_id)
        campaign_store.mark_site_wait(session, campaign_id=campaign_id, at=now)
        return None
    campaign_store.mark_site_wait(session, campaign_id=campaign_id, at=None)
    return lease_id


def _gives_way_to(
    session: Session, *, campaign_id: int, now: datetime, settings: Settings
) -> str | None:
    """The campaign this one leaves its sites to under the fleet policy (`fleet.gives_way`):
    every active campaign's remaining work counts; those holding a probe lease are running."""
    rows = campaign_store.fleet_rows(session, now=now)
    fresh = now - timedelta(seconds=settings.site_wait_fresh_s)
    pending = [
        fleet.Pending(str(r["campaign_id"]), r["sites"], r["remaining_s"])
        for r in rows
        if not r["leased"] or r["campaign_id"] == campaign_id
    ]
    asking = {
        str(r["campaign_id"])
        for r in rows
        if r["site_wait_at"] is not None and r["site_wait_at"] >= fresh
    }
    free = {site for r in rows for site in r["sites"]} - sitelocks.busy_sites(session, now=now)
    return fleet.gives_way(str(campaign_id), pending, free, asking)


def _site_names(session: Session, *, campaign_id: int) -> list[str]:
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    return [topology.local_site.name, topology.remote_site.name]


def release(session: Session, *, campaign_id: int, lease_id: str) -> bool:
    sitelocks.release_sites(session, holder=lease_id)
    return campaign_store.release_lease(session, campaign_id=campaign_id, lease_id=lease_id)


@contextmanager
def lease_heartbeat(
    engine: Engine, *, campaign_id: int, lease_id: str, settings: Settings
) -> Iterator[None]:
    """Renew the lease every `lease_heartbeat_s` while the body (a probe) runs, so that a live
    worker keeps its campaign however long the probe and a killed one loses it within
    `lease_ttl_s`."""
    stop = threading.Event()
    lasts = timedelta(seconds=settings.lease_ttl_s)

    def beat() -> None:
        while not stop.wait(settings.lease_heartbeat_s):
            try:
                with session_scope(engine) as s:
                    if not campaign_store.renew_lease(
                        s, campaign_id=campaign_id, lease_id=lease_id, lasts=lasts
                    ):
                        return  # someone else holds the campaign now
                    sitelocks.renew_sites(s, holder=lease_id, lasts=lasts)
            except Exception as exc:  # a database blip: the next beat tries again
                log.warning("campaign %s: lease renewal failed (%s)", campaign_id, exc)

    thread = threading.Thread(target=beat, name=f"lease-{campaign_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


# --- running one probe ---------------------------------------------------------------------------
def pending_request(
    session: Session, *, campaign_id: int, step: ProbeStep
) -> MeasurementRequest | None:
    """The measurement `step` needs, or None when its key is stored already (a redelivery).

    The probe itself runs outside any database transaction; `store_result` records it.
    """
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return None
    if step.key in measurements.done_keys(session, campaign_id=campaign.id):
        return None
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    return MeasurementRequest(
        sender=topology.local_site.name,
        receiver=topology.remote_site.name,
        allowed_subflows=None if step.allowed_subflows is None else list(step.allowed_subflows),
        cc=step.cc,
        buffer_bytes=buffer_bytes(step.bs_mib),
        duration_s=campaign.duration_s,
        path_manager=step.pm,
    )


def _record(session: Session, campaign_id: int, step: ProbeStep, **fields):
    """record_measurement under the step's key (idempotent: a second call returns the first)."""
    row, _ = measurements.record_measurement(
        session,
        campaign_id=campaign_id,
        phase=step.phase,
        pm=step.pm,
        cc=step.cc,
        bs_mib=step.bs_mib,
        run=step.run,
        excluded_subflow=step.excluded_subflow,
        **fields,
    )
    return row


def store_result(
    session: Session, *, campaign_id: int, step: ProbeStep, result: MeasurementResult
):
    """Store a probe's result under the step's key, with what it really ran: the observed
    subflows, the buffers read back, the quiet check. A probe that fell back to TCP, whose
    observed subflow set differs from the requested one, or that started on busy sites is stored
    as failed with the reason: never fitted."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    error = result.failure_reason()
    observed = [o.model_dump(mode="json") for o in result.observed_subflows]
    times = [t for t, _ in result.goodput_series]
    row = _record(
        session,
        campaign.id,
        step,
        # The subflows that carried data, as observed (not the ones asked for).
        subflows=sorted(o["name"] for o in observed if not o["backup"] and o["bytes_acked"] > 1),
        duration_s=campaign.duration_s,
        goodput_mbps=[mbps for _, mbps in result.goodput_series],
        mean_goodput_mbps=result.goodput_mbps if error is None else None,
        interval_s=round(times[1] - times[0], 6) if len(times) > 1 else 1.0,
        subflow_bytes=result.subflow_bytes,
        # Eq. 1 wants the unloaded RTT (ss minrtt) and the RTO the kernel used.
        rtt_ms=_per_subflow(observed, "min_rtt_ms") or dict(result.raw.get("subflow_rtt_ms") or {}),
        rto_ms=_per_subflow(observed, "rto_ms"),
        observed_subflows=observed,
        effective_buffers=dict(result.effective_buffers),
        quiet_check=result.quiet_check.model_dump(mode="json") if result.quiet_check else None,
        warmup_s=result.warmup_s,
        tool=result.tool,
        tool_version=result.tool_version,
        raw_output=json.dumps(result.to_dict(), default=str),
        status="failed" if error else "ok",
        error=f"not fitted: {error}" if error else None,
        started_at=result.started_at,
        finished_at=result.ended_at,
    )
    # The raw outputs travel with the result (no shared filesystem between sites).
    artifact_store.store_artifacts(session, measurement_id=row.id, artifacts=result.artifacts)
    return row


def _per_subflow(observed: list[dict], key: str) -> dict[str, float]:
    return {o["name"]: o[key] for o in observed if o.get(key)}


def record_failure(session: Session, *, campaign_id: int, step: ProbeStep, error: str):
    """After the retries: the step is stored as failed and the campaign goes on without it."""
    now = utcnow()
    return _record(
        session,
        campaign_id,
        step,
        subflows=list(step.allowed_subflows or []),
        duration_s=0.0,
        goodput_mbps=[],
        tool="none",
        status="failed",
        error=error[:2000],
        started_at=now,
        finished_at=now,
    )
