"""A finished campaign's answer for a delta and a buffer range: the one solve behind both the API's
recommendations and the dashboard's Fits page, so the two can never show different buffers.

A grid campaign is answered from its fitted curves. An adaptive campaign's own answer is its
sweep's stored decision (`decided`); here its what-ifs and its per-arm table read its arms'
measured means (`MeasuredCurve`) by the same rule as its decision, the smallest measured buffer
whose lower bound reaches (1 - delta) T*. Buffer bounds left out are the
buffers the campaign measured (a fitted curve is not extrapolated); bounds given are clipped to
them, and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from models import Campaign, FitRecord, MeasurementPhase
from probes.vocabulary import PCDC, PathManager

from ...algorithm import adaptive
from ...algorithm.measured_curve import MeasuredCurve
from ...algorithm.regression import Sample
from ...algorithm.saturating_curve import AnyCurve
from ...algorithm.solver import SolverAnswer, solve
from ...state.selected import selected_subsets
from ...store import campaigns as campaign_store
from ...store import measurements, results


@dataclass(frozen=True)
class SolvedCampaign:
    campaign: Campaign
    fits: list[FitRecord]  # the campaign's fits of its own model kind
    curves: list  # what the answer is read off: fitted curves, or measured means (adaptive)
    lo: float  # the buffer range it was solved on (within the measured range)
    hi: float
    solution: SolverAnswer | None
    error: str | None = None  # why there is no solution
    flags: tuple[str, ...] = ()

    def curves_of(self, pm: PathManager) -> list:
        return [c for c in self.curves if c.pm == pm]


def solve_campaign(
    session: Session,
    campaign: Campaign,
    delta: float,
    bs_min: float | None = None,
    bs_max: float | None = None,
) -> SolvedCampaign:
    """The campaign's answer for `delta` on [bs_min, bs_max] (None: the measured range)."""
    fits = results.list_fits(session, campaign_id=campaign.id, model_kind=campaign.model_kind)
    measured_lo, measured_hi = campaign_store.buffer_range(campaign)
    lo = measured_lo if bs_min is None else max(bs_min, measured_lo)
    hi = measured_hi if bs_max is None else min(bs_max, measured_hi)
    flags = []
    if (lo, hi) != (bs_min, bs_max) and (bs_min, bs_max) != (None, None):
        flags.append(f"buffer_range_limited_to_measured:{measured_lo:g}-{measured_hi:g}")

    def unsolved(curves: list, error: str) -> SolvedCampaign:
        return SolvedCampaign(campaign, fits, curves, lo, hi, None, error, tuple(flags))

    try:
        fitted: list[AnyCurve] = [c for rec in fits for c in results.fit_curves(rec)]
    except ValueError as exc:  # a stored curve with a non-finite coefficient
        return unsolved([], str(exc))
    rows = [
        m for m in measurements.ok_measurements(session, campaign_id=campaign.id,
                                                phase=MeasurementPhase.SWEEP)
        if m.mean_goodput_mbps is not None and lo <= m.bs_mib <= hi
    ]
    # an OTP is a promise: never above what was measured without saying so
    measured = [Sample(m.pm, m.cc, m.bs_mib, m.mean_goodput_mbps) for m in rows]
    curves = (
        _measured_curves(session, campaign, fitted, rows)
        if campaign.mode == "adaptive"
        else fitted
    )
    try:
        solution = solve(curves, delta, lo, hi, measured=measured)
    except ValueError as exc:
        return unsolved(curves, str(exc))
    return SolvedCampaign(campaign, fits, curves, lo, hi, solution, None, tuple(flags))


def _measured_curves(session, campaign, fitted, rows) -> list[MeasuredCurve]:
    """An adaptive campaign's arms as their measured means; a buffer reaches a target when the
    lower bound of its mean does (`adaptive.lower_bounds`: the rule its decision settled on)."""
    same = {c.arm: c.same_as_fullmesh for c in fitted}
    impacts = {r.cc: r for r in results.impact_results(session, campaign_id=campaign.id)}
    n_subflows = len(campaign.topology.subflows)
    for cc, subset in selected_subsets(campaign).items():  # the measured selection's SP*
        same.setdefault((PCDC, cc), len(subset) == n_subflows)
    samples, spread = measurements.point_goodputs(rows)
    lows = adaptive.lower_bounds(samples, spread)
    return [
        MeasuredCurve.from_points(
            pm, cc, [(bs, v) for bs, values in per_bs.items() for v in values],
            same.get((pm, cc), pm == PCDC and cc in impacts and impacts[cc].same_as_fullmesh),
            lows.get((pm, cc)),
        )
        for (pm, cc), per_bs in samples.items()
    ]
