"""A calibration campaign, step by step: impact phase -> Omega -> SP* -> buffer sweep -> fit ->
(more runs while the quality gate fails and the budget allows) -> solve -> stored recommendation.

Every function re-reads the campaign from the database and is idempotent, so the same steps serve
the embedded in-process runner and the Celery tasks, and a campaign resumes wherever it stopped:
a step is "done" when a measurement with its key exists (status ok, or failed after retries).

One probe is in flight per campaign at a time: `claim` hands out a lease for the next step and
refuses a second one until the lease is released or has expired (a worker killed mid-probe).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from models import NO_EXCLUSION, Campaign, Measurement, utcnow
from probes.base import EXCLUSION_MAX_SHARE, MeasurementRequest, MeasurementResult

from .algorithm.curve import FULLMESH, PCDC
from .algorithm.impact import ImpactResult, impact_from_series
from .algorithm.regression import Sample, fit
from .campaigns import (
    buffer_range,
    campaign_flags,
    get_campaign,
    impact_results,
    planned_probes,
    record_measurement,
    set_state,
    store_fits,
    store_impact,
)
from .inventory import get_topology, topology_spec
from .probing import Prober, buffer_bytes
from .schedules import record_events

IMPACT_BS_MIB = 0.0  # the impact phase runs with the kernel's autotuned buffers
LEASE_MARGIN_S = 120.0  # a probe's lease lasts its duration twice plus this
MAX_EXTRA_ROUNDS_WITHOUT_BUDGET = 2
FINAL_STATES = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class ProbeStep:
    phase: str  # "impact" | "buffer"
    pm: str
    cc: str
    bs_mib: float
    run: int
    excluded_subflow: str = NO_EXCLUSION
    allowed_subflows: tuple[str, ...] | None = None  # None: every subflow carries data

    @property
    def key(self) -> tuple:
        return (self.phase, self.pm, self.cc, float(self.bs_mib), self.run, self.excluded_subflow)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["allowed_subflows"] = (
            None if self.allowed_subflows is None else list(self.allowed_subflows)
        )
        return d

    @classmethod
    def from_dict(cls, data: dict) -> ProbeStep:
        allowed = data.get("allowed_subflows")
        return cls(**{**data, "allowed_subflows": None if allowed is None else tuple(allowed)})

    def describe(self) -> str:
        what = f"{self.phase} {self.pm}/{self.cc} run {self.run}"
        if self.phase == "buffer":
            what += f" bs {self.bs_mib:g} MiB"
        if self.excluded_subflow:
            what += f" without {self.excluded_subflow}"
        return what


# --- notes: what the campaign decided on the way (CCs dropped, failures, extra rounds) --------
def _notes(campaign: Campaign) -> dict:
    return dict(campaign.notes or {})


def _save_notes(campaign: Campaign, notes: dict) -> None:
    campaign.notes = notes  # a new dict, so that SQLAlchemy sees the JSON change


def _note(campaign: Campaign, key: str, value) -> None:
    notes = _notes(campaign)
    notes[key] = value
    _save_notes(campaign, notes)


# --- the plan -----------------------------------------------------------------------------------
def impact_steps(ccs: Iterable[str], runs: int, subflows: list[str]) -> list[ProbeStep]:
    """Per CC and run: TP_0 with every subflow, then TP_i with subflow i carrying no payload."""
    steps = []
    for cc in ccs:
        for run in range(1, runs + 1):
            steps.append(ProbeStep("impact", FULLMESH, cc, IMPACT_BS_MIB, run))
            for sf in subflows:
                others = tuple(s for s in subflows if s != sf)
                steps.append(ProbeStep("impact", FULLMESH, cc, IMPACT_BS_MIB, run, sf, others))
    return steps


def buffer_steps(
    pms: Iterable[str],
    ccs: Iterable[str],
    grid: Iterable[float],
    runs: int,
    subsets: dict[str, list[str]],
    subflows: list[str],
) -> list[ProbeStep]:
    """Every (PM, CC, buffer, run): PCDC with SP* of that CC, FullMesh with SP (Eq. 7)."""
    steps = []
    for run in range(1, runs + 1):  # run-major: a budget cut leaves every arm some data
        for pm in pms:
            for cc in ccs:
                allowed = None
                if pm == PCDC and set(subsets[cc]) != set(subflows):
                    allowed = tuple(subsets[cc])
                steps.extend(
                    ProbeStep("buffer", pm, cc, float(bs), run, NO_EXCLUSION, allowed)
                    for bs in grid
                )
    return steps


def _done_keys(session: Session, campaign_id: int) -> set[tuple]:
    rows = session.execute(
        select(
            Measurement.phase,
            Measurement.pm,
            Measurement.cc,
            Measurement.bs_mib,
            Measurement.run,
            Measurement.excluded_subflow,
        ).where(Measurement.campaign_id == campaign_id)
    )
    return {(p, pm, cc, float(bs), run, ex) for p, pm, cc, bs, run, ex in rows}


def _budget_left(campaign: Campaign) -> float | None:
    if campaign.probe_seconds_budget is None:
        return None
    return campaign.probe_seconds_budget - campaign.probe_seconds_used


# --- advancing ----------------------------------------------------------------------------------
def next_step(session: Session, campaign_id: int, prober: Prober) -> ProbeStep | None:
    """Do every piece of work that needs no probe, and return the next probe to run.

    None means the campaign is finished (done, failed or cancelled) and needs nothing more.
    """
    campaign = get_campaign(session, campaign_id)
    if campaign.state in FINAL_STATES:
        return None
    if campaign.state == "queued":
        set_state(session, campaign.id, "running")
    notes = _notes(campaign)
    if "ccs" not in notes and not _choose_ccs(session, campaign, prober):
        return None
    ccs = _notes(campaign)["ccs"]
    subflows = topology_spec(get_topology(session, campaign.topology_id)).subflow_names()
    done = _done_keys(session, campaign.id)

    for step in impact_steps(ccs, _notes(campaign)["impact_runs"], subflows):
        if step.key not in done:
            return _within_budget(session, campaign, step)

    known = {r.cc for r in impact_results(session, campaign.id)}
    if not set(ccs) <= known:
        ccs = _store_impact(session, campaign, ccs)
        if not ccs:
            return None
    subsets = {r.cc: r.subset for r in impact_results(session, campaign.id)}

    if not _notes(campaign).get("budget_exhausted"):
        for step in buffer_steps(
            campaign.pms, ccs, campaign.buffer_grid_mib, campaign.runs, subsets, subflows
        ):
            if step.key not in done:
                return _within_budget(session, campaign, step)

    fits = _fit(session, campaign, ccs)
    if fits is None:
        return None
    if not all(f.gate_passed for f in fits) and _another_round(campaign):
        return next_step(session, campaign_id, prober)
    _finish(session, campaign)
    return None


def _choose_ccs(session: Session, campaign: Campaign, prober: Prober) -> bool:
    """The campaign's CCs that both sites' kernels offer; the rest are reported as dropped."""
    offered = prober.available_ccs()
    kept = [cc for cc in campaign.ccs if cc in offered]
    dropped = {
        cc: "not offered by both sites' kernels (tcp_available_congestion_control)"
        for cc in campaign.ccs
        if cc not in offered
    }
    notes = _notes(campaign)
    # Extra rounds for the quality gate add buffer runs only: the impact phase keeps its runs.
    notes.update(
        {
            "ccs": kept,
            "dropped_ccs": dropped,
            "offered_ccs": sorted(offered),
            "impact_runs": campaign.runs,
        }
    )
    _save_notes(campaign, notes)
    subflows = get_topology(session, campaign.topology_id).subflows
    campaign.probes_total = planned_probes(
        len(subflows), len(kept), len(campaign.pms), len(campaign.buffer_grid_mib), campaign.runs
    )
    if not kept:
        _fail(
            session,
            campaign,
            f"none of the campaign's CCs {campaign.ccs} is offered by both "
            f"sites (they offer {sorted(offered)})",
        )
        return False
    session.flush()
    return True


def _within_budget(session: Session, campaign: Campaign, step: ProbeStep) -> ProbeStep | None:
    left = _budget_left(campaign)
    if left is None or left >= campaign.duration_s:
        return step
    if step.phase == "impact":
        _fail(
            session,
            campaign,
            f"probe-seconds budget spent before the impact phase ended "
            f"({campaign.probe_seconds_used:.0f} s used)",
        )
        return None
    _note(campaign, "budget_exhausted", True)
    session.flush()
    return next_step(session, campaign.id, _NoProber())


class _NoProber:
    """Past the budget nothing is measured; CCs were chosen already."""

    def available_ccs(self) -> set[str]:
        return set()

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        raise AssertionError("no probe past the budget")


def _store_impact(session: Session, campaign: Campaign, ccs: list[str]) -> list[str]:
    """Omega and SP* per CC from the impact runs; a CC whose runs all failed is dropped."""
    results = {r.cc: r for r in _impact_results_tolerant(session, campaign.id)}
    notes = _notes(campaign)
    dropped = dict(notes.get("dropped_ccs", {}))
    for cc in ccs:
        if cc not in results:
            dropped[cc] = "impact phase: no usable TP_0 and TP_i runs (all failed)"
    kept = [cc for cc in ccs if cc in results]
    store_impact(session, campaign.id, [results[cc] for cc in kept])
    notes.update({"ccs": kept, "dropped_ccs": dropped})
    _save_notes(campaign, notes)
    if not kept:
        _fail(session, campaign, "impact phase: no congestion control has usable runs")
    session.flush()
    return kept


def _impact_results_tolerant(session: Session, campaign_id: int) -> list[ImpactResult]:
    """Omega per CC from the ok impact runs, pooled over runs; a CC without a TP_0 run or without
    any TP_i run gives none, and a subflow whose TP_i runs all failed gets no Omega (and so is
    not in SP*)."""
    rows = session.scalars(
        select(Measurement)
        .where(
            Measurement.campaign_id == campaign_id,
            Measurement.phase == "impact",
            Measurement.status == "ok",
        )
        .order_by(Measurement.id)
    )
    by_cc: dict[str, dict[str, list[float]]] = {}
    for m in rows:
        by_cc.setdefault(m.cc, {}).setdefault(m.excluded_subflow, []).extend(m.goodput_mbps)
    out = []
    for cc, series in by_cc.items():
        tp0 = series.pop(NO_EXCLUSION, None)
        if tp0 and series and sum(tp0) > 0:
            out.append(impact_from_series(cc, tp0, series))
    return out


def _fit(session: Session, campaign: Campaign, ccs: list[str]):
    """f5 over the ok buffer runs; arms with fewer than 3 distinct buffers are left out."""
    rows = session.scalars(
        select(Measurement).where(
            Measurement.campaign_id == campaign.id,
            Measurement.phase == "buffer",
            Measurement.status == "ok",
            Measurement.cc.in_(ccs),
        )
    )
    by_arm: dict[tuple[str, str], list[Sample]] = {}
    for m in rows:
        if m.mean_goodput_mbps is not None:
            by_arm.setdefault((m.pm, m.cc), []).append(
                Sample(m.pm, m.cc, m.bs_mib, m.mean_goodput_mbps)
            )
    usable = {arm: s for arm, s in by_arm.items() if len({x.bs_mib for x in s}) >= 3}
    missing = sorted(f"{pm}/{cc}" for pm in campaign.pms for cc in ccs if (pm, cc) not in usable)
    _note(campaign, "unfitted_arms", missing)
    if not usable:
        _fail(session, campaign, "buffer phase: no (PM, CC) has runs at 3 buffer sizes")
        return None
    same = [r.cc for r in impact_results(session, campaign.id) if r.same_as_fullmesh]
    fits = fit(
        [s for rows in usable.values() for s in rows],
        model=campaign.model_kind,
        same_as_fullmesh=same,
    )
    store_fits(session, campaign.id, fits)
    session.flush()
    return fits


def _another_round(campaign: Campaign) -> bool:
    """The gate failed: one more run of the whole buffer sweep, if the budget allows it."""
    notes = _notes(campaign)
    rounds = notes.get("extra_rounds", 0)
    round_cost = (
        len(campaign.pms) * len(notes["ccs"]) * len(campaign.buffer_grid_mib) * campaign.duration_s
    )
    left = _budget_left(campaign)
    if notes.get("budget_exhausted"):
        return False
    if left is None and rounds >= MAX_EXTRA_ROUNDS_WITHOUT_BUDGET:
        return False
    if left is not None and left < round_cost:
        return False
    notes["extra_rounds"] = rounds + 1
    _save_notes(campaign, notes)
    campaign.runs += 1
    campaign.probes_total += round(round_cost / campaign.duration_s)
    return True


def _finish(session: Session, campaign: Campaign) -> None:
    from .recommend import recommend  # recommend imports campaigns; keep this module light

    failed = session.scalars(
        select(Measurement).where(
            Measurement.campaign_id == campaign.id, Measurement.status == "failed"
        )
    ).all()
    _note(campaign, "failed_probes", [_failed_entry(m) for m in failed])
    set_state(session, campaign.id, "done")
    lo, hi = buffer_range(campaign)  # solved on the measured range only
    outcome = recommend(
        session,
        topology_id=campaign.topology_id,
        delta=campaign.delta,
        bs_min_mib=lo,
        bs_max_mib=hi,
    )
    rec = outcome.recommendation
    flags = list(rec.quality_flags or [])
    flags += [f for f in campaign_flags(_notes(campaign)) if f not in flags]
    rec.quality_flags = flags
    rec.provenance = {**(rec.provenance or {}), "campaign_notes": _public_notes(campaign)}
    _note(campaign, "recommendation_id", rec.id)
    session.flush()
    record_events(session, campaign)


def _public_notes(campaign: Campaign) -> dict:
    return {k: v for k, v in _notes(campaign).items() if k != "lease"}


def _failed_entry(m: Measurement) -> dict:
    return {
        "phase": m.phase,
        "pm": m.pm,
        "cc": m.cc,
        "bs_mib": m.bs_mib,
        "run": m.run,
        "excluded_subflow": m.excluded_subflow,
        "error": m.error,
    }


def _fail(session: Session, campaign: Campaign, why: str) -> None:
    set_state(session, campaign.id, "failed", error=why)
    session.flush()


# --- leases: one probe in flight per campaign ----------------------------------------------------
def claim(
    session: Session, campaign_id: int, step: ProbeStep, now: float | None = None
) -> str | None:
    """A lease id for running `step`, or None while another live lease holds the campaign."""
    now = time.time() if now is None else now
    campaign = get_campaign(session, campaign_id)
    lease = _notes(campaign).get("lease")
    if lease and lease["until"] > now and tuple(lease["key"]) != step.key:
        return None
    if lease and lease["until"] > now and tuple(lease["key"]) == step.key:
        return lease["id"]  # a redelivered or duplicate request for the same step: same lease
    lease = {
        "id": uuid.uuid4().hex,
        "key": list(step.key),
        "until": now + 2 * campaign.duration_s + LEASE_MARGIN_S,
    }
    _note(campaign, "lease", lease)
    session.flush()
    return lease["id"]


def lease_live(session: Session, campaign_id: int, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    lease = _notes(get_campaign(session, campaign_id)).get("lease")
    return bool(lease) and lease["until"] > now


def unattended_campaigns(session: Session, now: float | None = None) -> list[int]:
    """Queued or running campaigns that no live lease holds: nobody is working on them."""
    campaigns = session.scalars(
        select(Campaign).where(Campaign.state.in_(("queued", "running"))).order_by(Campaign.id)
    )
    return [c.id for c in campaigns if not lease_live(session, c.id, now)]


def drop_lease(session: Session, campaign_id: int) -> None:
    """Forget any lease: its holder is known to be gone (the embedded executor restarted)."""
    campaign = get_campaign(session, campaign_id)
    notes = _notes(campaign)
    if notes.pop("lease", None) is not None:
        _save_notes(campaign, notes)
        session.flush()


def fail_campaign(session: Session, campaign_id: int, why: str) -> None:
    """Stop a campaign that cannot go on (no testbed for its sites, ...), saying why."""
    campaign = get_campaign(session, campaign_id)
    if campaign.state not in FINAL_STATES:
        if campaign.state == "queued":
            set_state(session, campaign.id, "running")
        _fail(session, campaign, why)


def release(session: Session, campaign_id: int, lease_id: str) -> bool:
    """Drop the lease if it is still `lease_id`'s; False if someone else holds the campaign."""
    campaign = get_campaign(session, campaign_id)
    notes = _notes(campaign)
    if (notes.get("lease") or {}).get("id") != lease_id:
        return False
    notes.pop("lease")
    _save_notes(campaign, notes)
    session.flush()
    return True


# --- running one probe ---------------------------------------------------------------------------
def request_for(session: Session, campaign: Campaign, step: ProbeStep) -> MeasurementRequest:
    topology = get_topology(session, campaign.topology_id)
    return MeasurementRequest(
        sender=topology.local_site.name,
        receiver=topology.remote_site.name,
        allowed_subflows=None if step.allowed_subflows is None else list(step.allowed_subflows),
        cc=step.cc,
        buffer_bytes=buffer_bytes(step.bs_mib),
        duration_s=campaign.duration_s,
        path_manager="pcdc" if step.pm == PCDC else "fullmesh",
    )


def pending_request(
    session: Session, campaign_id: int, step: ProbeStep
) -> MeasurementRequest | None:
    """The measurement `step` needs, or None when its key is stored already (a redelivery).

    The probe itself runs outside any database transaction; `store_result` records it.
    """
    campaign = get_campaign(session, campaign_id)
    if campaign.state in FINAL_STATES or step.key in _done_keys(session, campaign.id):
        return None
    return request_for(session, campaign, step)


def _record(session: Session, campaign_id: int, step: ProbeStep, **fields):
    """record_measurement under the step's key (idempotent: a second call returns the first)."""
    row, _ = record_measurement(
        session,
        campaign_id,
        phase=step.phase,
        pm=step.pm,
        cc=step.cc,
        bs_mib=step.bs_mib,
        run=step.run,
        excluded_subflow=step.excluded_subflow,
        **fields,
    )
    return row


def store_result(session: Session, campaign_id: int, step: ProbeStep, result: MeasurementResult):
    """Store a probe's result under the step's key. A run that fell back to TCP, or whose
    excluded subflows carried more than 1 % of the bytes, is stored as failed: never fitted."""
    campaign = get_campaign(session, campaign_id)
    if step.allowed_subflows is not None:
        subflows = list(step.allowed_subflows)
    else:
        subflows = sorted(result.subflow_bytes)
    ok, error = result.mptcp_ok, None
    if not ok:
        error = f"not fitted: {result.fallback_reason}"
    elif leaked := _leaked_subflows(step, result):
        # An "excluded" subflow that carried payload makes TP_i (or SP*'s sweep) meaningless.
        ok, error = False, f"not fitted: excluded subflows carried payload: {leaked}"
    return _record(
        session,
        campaign.id,
        step,
        subflows=subflows,
        duration_s=campaign.duration_s,
        goodput_mbps=[mbps for _, mbps in result.goodput_series],
        interval_s=_interval(result),
        subflow_bytes=result.subflow_bytes,
        rtt_ms=dict(result.raw.get("subflow_rtt_ms") or {}),
        tool=result.tool,
        tool_version=result.tool_version,
        raw_output=_raw_text(result),
        status="ok" if ok else "failed",
        error=error,
        started_at=result.started_at,
        finished_at=result.ended_at,
    )


def _leaked_subflows(step: ProbeStep, result: MeasurementResult) -> dict[str, str]:
    """Subflows the step excluded from payload that carried more than 1 % of the bytes."""
    if step.allowed_subflows is None:
        return {}
    excluded = [n for n in result.subflow_bytes if n not in step.allowed_subflows]
    return {
        n: f"{100 * result.subflow_share(n):.1f} %"
        for n in excluded
        if result.subflow_share(n) > EXCLUSION_MAX_SHARE
    }


def record_failure(session: Session, campaign_id: int, step: ProbeStep, error: str):
    """After the retries: the step is stored as failed and the campaign goes on without it."""
    now = utcnow()
    return _record(
        session,
        get_campaign(session, campaign_id).id,
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


def _interval(result: MeasurementResult) -> float:
    times = [t for t, _ in result.goodput_series]
    return round(times[1] - times[0], 6) if len(times) > 1 else 1.0


def _raw_text(result: MeasurementResult) -> str:
    import json

    return json.dumps(result.to_dict(), default=str)
