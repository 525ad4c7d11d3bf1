"""From a campaign's stored runs to Omega / SP* (f3, f4) and the fits (f5): the one derivation
path that campaigns, tests, benchmarks and the dashboard's seed data all go through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from models import NO_EXCLUSION, Campaign, MeasurementPhase

from ...algorithm.impact_confidence import (
    DEFAULT_CONFIDENCE,
    ConfidentImpact,
    ImpactRun,
    impact_with_confidence,
)
from ...algorithm.regression import Fit, Sample, fit
from ...state.selected import selected_subsets, sweep_arms
from ...store import measurements, results

MIN_BUFFERS_PER_ARM = 3  # a quadratic through fewer distinct buffers is not a fit


def impact_from_runs(
    session: Session,
    *,
    campaign_id: int,
    subflows: Sequence[str],
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[ConfidentImpact]:
    """Omega per CC and subflow from the ok impact runs (Eq. 5, one Omega per run, each from
    that run's TP_0 and TP_i means after warm-up), their mean and confidence interval, and SP*
    from the means (Eq. 6).

    A run without its TP_0 is left out; a CC without any usable run gives none; a subflow whose
    TP_i runs all failed gets no Omega (so it is not in SP*, and PCDC differs from FullMesh).
    """
    by_cc: dict[str, dict[int, dict[str, float]]] = {}
    for m in measurements.ok_measurements(session, campaign_id=campaign_id, phase="impact"):
        if m.mean_goodput_mbps is not None:
            by_cc.setdefault(m.cc, {}).setdefault(m.run, {})[m.excluded_subflow] = (
                m.mean_goodput_mbps
            )
    out = []
    for cc, runs in by_cc.items():
        usable = [
            ImpactRun(r[NO_EXCLUSION], {k: v for k, v in r.items() if k != NO_EXCLUSION})
            for r in runs.values()
            if r.get(NO_EXCLUSION, 0) > 0 and len(r) > 1
        ]
        if usable:
            out.append(impact_with_confidence(cc, usable, subflows, confidence))
    return out


@dataclass(frozen=True)
class DerivedFits:
    fits: list[Fit]
    unfitted_arms: list[str]  # "PM/CC" with runs at fewer than MIN_BUFFERS_PER_ARM buffers


def fit_from_runs(
    session: Session, *, campaign: Campaign, ccs: Sequence[str] | None = None
) -> DerivedFits:
    """f5 over the ok buffer runs (one sample per run: its mean goodput) of `ccs` (default: the
    campaign's CCs); arms with runs at fewer than 3 distinct buffers are left out and named."""
    ccs = list(ccs if ccs is not None else campaign.measured_ccs)
    by_arm: dict[tuple[str, str], list[Sample]] = {}
    for m in measurements.ok_measurements(
        session, campaign_id=campaign.id, phase=MeasurementPhase.SWEEP, ccs=ccs
    ):
        if m.mean_goodput_mbps is not None:
            by_arm.setdefault((m.pm, m.cc), []).append(
                Sample(m.pm, m.cc, m.bs_mib, m.mean_goodput_mbps)
            )
    usable = {
        arm: s for arm, s in by_arm.items() if len({x.bs_mib for x in s}) >= MIN_BUFFERS_PER_ARM
    }
    unfitted = sorted(
        f"{pm}/{cc}" for pm, cc in sweep_arms(campaign, ccs) if (pm, cc) not in usable
    )
    if not usable:
        return DerivedFits([], unfitted)
    same = [
        r.cc
        for r in results.impact_results(session, campaign_id=campaign.id)
        if r.same_as_fullmesh
    ]
    if selected := selected_subsets(campaign):  # the measured selection's SP*, where it ran
        n_subflows = len(campaign.topology.subflows)
        same = [cc for cc, subset in selected.items() if len(subset) == n_subflows]
    fits = fit(
        [s for rows in usable.values() for s in rows],
        model=campaign.model_kind,
        same_as_fullmesh=same,
    )
    return DerivedFits(fits, unfitted)
