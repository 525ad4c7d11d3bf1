"""What a campaign's report shows, read once from the stored rows (`flows.takeaways.report` draws
it).

The answer's figures come from `bundle_import.rederive` (an adaptive sweep's stored decision,
else `solve_campaign`, the one solve of a campaign), on the bounds and delta of the answer the
campaign gave, so the report can never show another buffer than the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from models import Campaign, MeasurementPhase, Recommendation

from ...state import Selection
from ...state.selected import measured_selection
from ...store import campaigns as campaign_store
from ...store import inventory, measurements, results
from ...store import recommendations as recommendation_store
from ..answers.campaign_answer import SolvedCampaign
from .bundle_export import software
from .bundle_import import rederive


@dataclass
class ReportData:
    campaign: Campaign
    title: str
    subflows: list[str]
    solved: SolvedCampaign
    answer: Recommendation | None
    # cc -> subflow -> (omega, low, high, in SP*)
    omegas: dict[str, dict[str, tuple[float, float | None, float | None, bool]]]
    selection: Selection | None
    fitted: list  # every fitted curve of the campaign's model kind (any PM, CC)
    # (pm, cc) -> [(buffer MiB, goodput Mbit/s)] of the ok buffer-phase probes
    points: dict[tuple[str, str], list[tuple[float, float]]]
    # goodputs of probes of the answer's configuration (OPM, OCC at OBS): sweep and warm checks
    fresh: list[tuple[str, float]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)


def report_data(session: Session, *, campaign_id: int) -> ReportData:
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    solved = rederive(session, campaign_id=campaign.id)
    answer = (recommendation_store.get_recommendation(
        session, recommendation_id=campaign.recommendation_id)
        if campaign.recommendation_id is not None else None)
    intervals = results.omega_intervals(session, campaign_id=campaign.id)
    omegas = {}
    for r in results.impact_results(session, campaign_id=campaign.id):
        omegas[r.cc] = {
            sf: (w, intervals.get(r.cc, {}).get(sf, {}).get("low"),
                 intervals.get(r.cc, {}).get(sf, {}).get("high"), sf in r.subset)
            for sf, w in r.omegas.items()}
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for m in measurements.ok_measurements(session, campaign_id=campaign.id,
                                          phase=MeasurementPhase.SWEEP):
        if m.mean_goodput_mbps is not None:
            points.setdefault((m.pm, m.cc), []).append((m.bs_mib, m.mean_goodput_mbps))
    fitted = [c for rec in solved.fits for c in results.fit_curves(rec)]
    runs = measurements.list_runs(session, campaign_id=campaign.id,
                                  phases=("impact", "selection", MeasurementPhase.SWEEP, "warm"))
    counts: dict[str, int] = {}
    for m in runs:
        counts[m.status] = counts.get(m.status, 0) + 1
    return ReportData(
        campaign=campaign,
        title=(f"Campaign {campaign.id}: {topology.local_site.name} -> "
               f"{topology.remote_site.name} ({campaign.mode}, {campaign.state})"),
        subflows=[sf.name for sf in topology.subflows],
        solved=solved,
        answer=answer,
        omegas=omegas,
        selection=measured_selection(campaign),
        fitted=fitted,
        points=points,
        fresh=_fresh(runs, solved),
        counts=counts,
        software=software(runs),
    )


def _fresh(runs, solved: SolvedCampaign) -> list[tuple[str, float]]:
    s = solved.solution
    if s is None:
        return []
    return [(m.phase, m.mean_goodput_mbps) for m in runs
            if m.status == "ok" and m.mean_goodput_mbps is not None and m.pm == s.opm
            and m.cc == s.occ and m.phase in (MeasurementPhase.SWEEP, "warm")
            and abs(m.bs_mib - s.obs_mib) <= 1e-9 * max(1.0, s.obs_mib)]
