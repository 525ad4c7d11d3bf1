"""Warm recalibration: a scheduled campaign first checks the last calibrated
answer with a few probes instead of sweeping again.

It probes the chosen arm at OBS and the arm of T* at T*'s buffer (`WARM_RUNS` times each, in
the `warm` phase, so they never enter a fit). When every mean stays within the drift tolerance
of what the last answer promised (OTP, T*), the campaign is done and answers from the last
calibration's fits again (`warm_confirmed`); otherwise it widens into the full campaign it was
planned as (`warm_drifted`). The tolerance is max(delta x promise, the half-width of the
verification's Student-t interval): a change the probes cannot tell from their own noise, or
smaller than what the answer already gives away, is not drift.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import fmean, stdev

from sqlalchemy.orm import Session

from models import NO_EXCLUSION, Campaign
from probes.vocabulary import PCDC, PathManager

from ...algorithm.student_t import t_critical
from ...state import Warm, WarmCheck, state_of
from ...state.selected import selected_subsets
from ...store import campaigns as campaign_store
from ...store import inventory, measurements, recommendations, results, schedules
from . import budget
from .plan import ProbeStep

WARM_RUNS = 3
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Check:
    """One promise of the last answer to verify: an arm at a buffer and the goodput promised."""

    what: str  # "obs" (the chosen arm at OBS) or "t_star"
    step_base: ProbeStep
    promised_mbps: float

    def steps(self) -> list[ProbeStep]:
        b = self.step_base
        return [
            ProbeStep("warm", b.pm, b.cc, b.bs_mib, run, b.excluded_subflow, b.allowed_subflows)
            for run in range(1, WARM_RUNS + 1)
        ]


def start_warm(session: Session, *, campaign: Campaign) -> bool:
    """Mark a new scheduled campaign warm when its topology has a calibrated answer to check."""
    previous = recommendations.latest_calibrated_campaign(
        session, topology_id=campaign.topology_id
    )
    if previous is None:
        return False
    rec = recommendations.calibrated_recommendation_of(session, campaign_id=previous.id)
    promises = [] if rec is None else checks(session, recommendation=rec,
                                             campaign_id=previous.id)
    if not promises:
        return False
    campaign_store.update_state(campaign, warm=Warm(
        from_campaign=previous.id, from_recommendation=rec.id,
        probes=len(promises) * WARM_RUNS,  # the plan until the verdict; widened on drift
    ))
    budget.replan(campaign)
    session.flush()
    return True


def checks(session: Session, *, recommendation, campaign_id: int) -> list[Check]:
    """The last answer's promises: the chosen arm at OBS (OTP), T*'s arm at T*'s buffer."""
    outputs = recommendation.outputs or {}
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    every = [sf.name for sf in topology.subflows]
    # the subsets the campaign probed its PCDC arms on: the measured selection's SP* where it
    # ran (adaptive mode), else Ω's
    subsets = {r.cc: r.subset for r in results.impact_results(session, campaign_id=campaign_id)}
    subsets.update(selected_subsets(campaign))

    def allowed(pm: PathManager, cc: str) -> tuple[str, ...] | None:
        subset = outputs.get("subflows_used") if cc == recommendation.occ else subsets.get(cc)
        if pm != PCDC or not subset or set(subset) == set(every):
            return None
        return tuple(subset)

    out = []
    if recommendation.obs_mib and recommendation.otp_mbps:
        pm, cc = recommendation.opm, recommendation.occ
        out.append(Check("obs", ProbeStep("warm", pm, cc, float(recommendation.obs_mib), 0,
                                          NO_EXCLUSION, allowed(pm, cc)),
                         float(recommendation.otp_mbps)))
    t_star = outputs.get("t_star") or {}
    if t_star.get("bs_mib") and t_star.get("tp_mbps"):
        pm, cc = t_star["pm"], t_star["cc"]
        out.append(Check("t_star", ProbeStep("warm", pm, cc, float(t_star["bs_mib"]), 0,
                                             NO_EXCLUSION, allowed(pm, cc)),
                         float(t_star["tp_mbps"])))
    return out


def pending_checks(session: Session, *, campaign: Campaign) -> list[Check] | None:
    """The warm checks of a campaign still to be judged, or None (not warm, or judged)."""
    warm = state_of(campaign).warm
    if warm is None or warm.verdict is not None:
        return None
    rec = recommendations.get_recommendation(
        session, recommendation_id=warm.from_recommendation
    )
    return checks(session, recommendation=rec, campaign_id=warm.from_campaign)


def drifted(samples: list[float], promised: float, delta: float) -> tuple[bool, float]:
    """(drifted?, tolerance): the mean moved from the promise by more than max(delta x promise,
    the samples' t-interval half-width)."""
    half = 0.0
    if len(samples) >= 2:
        half = t_critical(CONFIDENCE, len(samples) - 1) * stdev(samples) / len(samples) ** 0.5
    tolerance = max(delta * promised, half)
    return bool(abs(fmean(samples) - promised) > tolerance), float(tolerance)


def judge(session: Session, *, campaign: Campaign, checks_: list[Check]) -> bool:
    """Compare the warm probes with the promises; note and record the verdict. True: confirmed
    (the campaign can finish on the last calibration); False: widen to the full campaign."""
    by_arm: dict[tuple[str, str, float], list[float]] = {}
    for m in measurements.ok_measurements(session, campaign_id=campaign.id, phase="warm"):
        if m.mean_goodput_mbps is not None:
            by_arm.setdefault((m.pm, m.cc, float(m.bs_mib)), []).append(m.mean_goodput_mbps)
    warm = state_of(campaign).warm
    report, moved = [], False
    for check in checks_:
        b = check.step_base
        samples = by_arm.get((b.pm, b.cc, float(b.bs_mib)), [])
        if not samples:  # every verification probe failed: no evidence the answer still holds
            moved = True
            report.append(WarmCheck.from_dict({
                "check": check.what, "arm": f"{b.pm}/{b.cc}", "bs_mib": b.bs_mib,
                "promised_mbps": check.promised_mbps, "measured_mbps": None}))
            continue
        off, tolerance = drifted(samples, check.promised_mbps, campaign.delta)
        moved = moved or off
        report.append(WarmCheck(
            check=check.what, arm=f"{b.pm}/{b.cc}", bs_mib=b.bs_mib,
            promised_mbps=check.promised_mbps, measured_mbps=round(fmean(samples), 4),
            runs=len(samples), tolerance_mbps=round(tolerance, 4), drifted=off,
        ))
    verdict = "warm_drifted" if moved else "warm_confirmed"
    if not moved:  # answer on the range the last calibration measured, as it did
        previous = campaign_store.get_campaign(session, campaign_id=warm.from_campaign)
        campaign.buffer_grid_mib = list(previous.buffer_grid_mib)
    campaign_store.update_state(campaign, warm=replace(warm, verdict=verdict,
                                                       checks=tuple(report)))
    _record_event(session, campaign, verdict, warm.from_campaign, report)
    session.flush()
    return not moved


def _record_event(session, campaign: Campaign, kind: str, previous_id: int, report) -> None:
    for r in report:
        # (no verdict: every probe failed, which counts as drifted)
        if kind == "warm_drifted" and r.drifted is False and r.measured_mbps:
            continue  # a drifted campaign names the checks that moved
        change = None
        if r.measured_mbps is not None and r.promised_mbps:
            change = 100.0 * (r.measured_mbps - r.promised_mbps) / r.promised_mbps
        schedules.add_event(
            session, campaign=campaign, previous_campaign_id=previous_id, kind=kind,
            subject=f"{r.check} {r.arm} {r.bs_mib:.3g} MiB",
            before=r.promised_mbps, after=r.measured_mbps, change_pct=change,
        )
