"""Read-only queries behind the dashboard pages.

Everything here reads the database through the store (`service.store`) or, where the store has
no such query, through the SQLAlchemy models directly. Nothing here writes. Each function returns
plain dicts/lists that the templates render and that are safe to serialise to JSON for the charts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import Campaign, FitRecord, ImpactFactor, Measurement, Recommendation, Topology
from service.algorithm.impact import is_harmful
from service.algorithm.solver import solve
from service.store import artifacts as artifact_store
from service.store import campaigns as campaign_store
from service.store import inventory, recommendations, results

CURVE_POINTS = 120  # points per fitted curve drawn on the Fits page


# --- overview ------------------------------------------------------------------------------------
def _latest_by_topology(session: Session, model, topology_ids: list[int]) -> dict[int, Any]:
    """The newest row of `model` (by id) for each topology id."""
    if not topology_ids:
        return {}
    newest = (
        select(func.max(model.id))
        .where(model.topology_id.in_(topology_ids))
        .group_by(model.topology_id)
    )
    rows = session.scalars(select(model).where(model.id.in_(newest)))
    return {row.topology_id: row for row in rows}


def overview(session: Session, limit: int = 200) -> dict:
    topologies, total = inventory.list_topologies(session, limit=limit)
    ids = [t.id for t in topologies]
    latest_rec = _latest_by_topology(session, Recommendation, ids)
    latest_campaign = _latest_by_topology(session, Campaign, ids)
    recent_campaigns, campaigns_total = campaign_store.list_campaigns(session, limit=10)
    return {
        "topologies": [
            {
                "topology": t,
                "homogeneous": inventory.topology_spec(t).is_homogeneous(),
                "recommendation": latest_rec.get(t.id),
                "campaign": latest_campaign.get(t.id),
            }
            for t in topologies
        ],
        "topologies_total": total,
        "campaigns": recent_campaigns,
        "campaigns_total": campaigns_total,
    }


# --- topology ------------------------------------------------------------------------------------
def topology_page(session: Session, topology_id: int) -> dict:
    topology = inventory.get_topology(session, topology_id=topology_id)
    recs, rec_total = recommendations.list_recommendations(
        session, topology_id=topology.id, limit=1
    )
    campaigns, campaigns_total = campaign_store.list_campaigns(
        session, topology_id=topology.id, limit=20
    )
    isps = {i.id: i for site in (topology.local_site, topology.remote_site) for i in site.isps}
    subflows = [
        {
            "subflow": sf,
            "local_isp": isps.get(sf.local_isp_id),
            "remote_isp": isps.get(sf.remote_isp_id),
        }
        for sf in topology.subflows
    ]
    return {
        "topology": topology,
        "homogeneous": inventory.topology_spec(topology).is_homogeneous(),
        "subflows": subflows,
        "recommendation": recs[0] if recs else None,
        "recommendations_total": rec_total,
        "campaigns": campaigns,
        "campaigns_total": campaigns_total,
        "active_campaign": campaign_store.active_campaign(session, topology_id=topology.id),
    }


def _campaign_of(
    session: Session, topology: Topology, campaign_id: int | None, what: type
) -> Campaign | None:
    """The asked-for campaign of this topology, or the newest one with rows in `what`."""
    return results.table_campaign(
        session, topology_id=topology.id, campaign_id=campaign_id, what=what
    )


def _campaigns_with(session: Session, topology_id: int, what: type) -> list[Campaign]:
    """Every campaign of the topology that has rows in `what`, oldest first."""
    return results.campaigns_with(session, topology_id=topology_id, what=what)


# --- impact factors (Tables 2 and 3, and their history) -------------------------------------------
@dataclass
class HistoryRow:
    subflow: str
    cc: str
    values: list[float | None]  # one per campaign, oldest first
    sign_changes: list[bool]  # True where the sign differs from the previous known value

    @property
    def has_change(self) -> bool:
        return any(self.sign_changes)


@dataclass
class ImpactView:
    topology: Topology
    campaign: Campaign | None
    campaigns: list[Campaign]  # every campaign with impact factors, oldest first
    subflows: list[str]
    ccs: list[str]
    omega: dict[tuple[str, str], float]  # (subflow, cc) -> Omega
    in_subset: dict[tuple[str, str], bool]
    subsets: list[dict]  # Table 3 rows
    history: list[HistoryRow] = field(default_factory=list)
    sign_change_count: int = 0


def impact_page(session: Session, topology_id: int, campaign_id: int | None) -> ImpactView:
    topology = inventory.get_topology(session, topology_id=topology_id)
    campaign = _campaign_of(session, topology, campaign_id, ImpactFactor)
    with_impact = _campaigns_with(session, topology.id, ImpactFactor)
    names = [sf.name for sf in topology.subflows]
    view = ImpactView(
        topology=topology,
        campaign=campaign,
        campaigns=with_impact,
        subflows=list(names),
        ccs=[],
        omega={},
        in_subset={},
        subsets=[],
    )
    if campaign is not None:
        for result in results.impact_results(session, campaign_id=campaign.id):
            view.ccs.append(result.cc)
            for name, value in result.omegas.items():
                view.omega[(name, result.cc)] = value
                view.in_subset[(name, result.cc)] = name in result.subset
                if name not in view.subflows:  # a subflow since removed from the topology
                    view.subflows.append(name)
            view.subsets.append(
                {
                    "cc": result.cc,
                    "subset": result.subset,
                    "standby": result.standby,
                    "same_as_fullmesh": result.same_as_fullmesh,
                }
            )
    # History: every (subflow, CC) across the campaigns that measured impact factors.
    if with_impact:
        ids = [c.id for c in with_impact]
        column = {cid: k for k, cid in enumerate(ids)}
        rows = session.execute(
            select(
                ImpactFactor.campaign_id, ImpactFactor.subflow, ImpactFactor.cc, ImpactFactor.omega
            ).where(ImpactFactor.campaign_id.in_(ids))
        )
        values: dict[tuple[str, str], list[float | None]] = {}
        ccs_seen: list[str] = []
        subflows_seen: list[str] = list(names)
        for cid, subflow, cc, omega in rows:
            values.setdefault((subflow, cc), [None] * len(ids))[column[cid]] = omega
            if cc not in ccs_seen:
                ccs_seen.append(cc)
            if subflow not in subflows_seen:
                subflows_seen.append(subflow)
        cc_order = view.ccs + [cc for cc in ccs_seen if cc not in view.ccs]
        for subflow in subflows_seen:
            for cc in cc_order:
                series = values.get((subflow, cc))
                if series is None:
                    continue
                # A change is a flip of Eq. 6's rule (harmful or not), as the events count it.
                changes, previous = [], None
                for value in series:
                    harmful = None if value is None else is_harmful(value)
                    changes.append(None not in (harmful, previous) and harmful != previous)
                    if harmful is not None:
                        previous = harmful
                view.history.append(HistoryRow(subflow, cc, series, changes))
                view.sign_change_count += sum(changes)
    return view


# --- fits (Table 4, Figure 5) --------------------------------------------------------------------
def measured_points(session: Session, campaign_id: int) -> list[dict]:
    """Buffer-phase runs grouped per (PM, CC, buffer): mean, min, max goodput and run count."""
    rows = session.execute(
        select(
            Measurement.pm,
            Measurement.cc,
            Measurement.bs_mib,
            func.avg(Measurement.mean_goodput_mbps),
            func.min(Measurement.mean_goodput_mbps),
            func.max(Measurement.mean_goodput_mbps),
            func.count(Measurement.id),
        )
        .where(
            Measurement.campaign_id == campaign_id,
            Measurement.phase == "buffer",
            Measurement.status == "ok",
            Measurement.mean_goodput_mbps.is_not(None),
        )
        .group_by(Measurement.pm, Measurement.cc, Measurement.bs_mib)
        .order_by(Measurement.pm, Measurement.cc, Measurement.bs_mib)
    )
    return [
        {
            "pm": pm,
            "cc": cc,
            "bs": float(bs),
            "tp": float(mean),
            "min": float(lo),
            "max": float(hi),
            "n": int(n),
        }
        for pm, cc, bs, mean, lo, hi, n in rows
    ]


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def fits_page(
    session: Session, topology_id: int, campaign_id: int | None, delta: float | None
) -> dict:
    topology = inventory.get_topology(session, topology_id=topology_id)
    campaign = _campaign_of(session, topology, campaign_id, FitRecord)
    page: dict[str, Any] = {
        "topology": topology,
        "campaign": campaign,
        "campaigns": _campaigns_with(session, topology.id, FitRecord),
        "fits": [],
        "solution": None,
        "solve_error": None,
        "delta": delta,
        "charts": [],
        "other_kinds": [],
        "fit_rows": [],
    }
    if campaign is None:
        return page
    page["delta"] = delta if delta is not None else campaign.delta
    fits = results.list_fits(session, campaign_id=campaign.id, model_kind=campaign.model_kind)
    all_kinds = {f.model_kind for f in results.list_fits(session, campaign_id=campaign.id)}
    page["other_kinds"] = sorted(all_kinds - {campaign.model_kind})
    page["fits"] = fits
    lo, hi = campaign_store.buffer_range(campaign)
    curves_of, solution, page["solve_error"] = _solve_fits(fits, page["delta"], lo, hi)
    page["solution"] = solution
    points = measured_points(session, campaign.id)
    page["charts"] = [
        _fit_chart(rec, curves_of[rec.id], solution, points, lo, hi) for rec in fits
    ]
    # Table rows per fit, with the stored quality numbers.
    page["fit_rows"] = [
        {"fit": rec, "adj_r2": _finite(rec.adj_r2), "chart": chart}
        for rec, chart in zip(fits, page["charts"], strict=True)
    ]
    return page


def _solve_fits(fits, delta: float, lo: float, hi: float):
    """(curves per fit id, the solution or None, the error that stopped it or None)."""
    curves_of: dict[int, list] = {}
    error = None
    for rec in fits:
        try:
            curves_of[rec.id] = results.fit_curves(rec)
        except ValueError as exc:  # a stored curve with a non-finite coefficient
            curves_of[rec.id] = []
            error = f"{rec.pm}: {exc}"
    curves = [c for rec in fits for c in curves_of[rec.id]]
    solution = None
    if curves and error is None:
        try:
            solution = solve(curves, delta, lo, hi)
        except ValueError as exc:
            error = str(exc)
    return curves_of, solution, error


def _fit_chart(rec, curves, solution, points, lo: float, hi: float) -> dict:
    """One PM's chart: every CC's fitted curve and measured points, T*, the target, the answer."""
    arms = {(a.pm, a.cc): a for a in solution.arms} if solution else {}
    xs = [lo + k * (hi - lo) / CURVE_POINTS for k in range(CURVE_POINTS + 1)]
    series = []
    for curve in curves:
        arm = arms.get((curve.pm, curve.cc))
        series.append(
            {
                "cc": curve.cc,
                "a": curve.a,
                "b": curve.b,
                "c": curve.c,
                "curve": [[x, curve.tp(x)] for x in xs],
                "points": [p for p in points if p["pm"] == rec.pm and p["cc"] == curve.cc],
                "obs": arm.obs_mib if arm else None,
                "tp_at_obs": arm.tp_at_obs_mbps if arm else None,
                "peak_bs": arm.peak_bs_mib if arm else None,
                "peak_tp": arm.peak_tp_mbps if arm else None,
                "p_values": rec.curve_p_values.get(curve.cc, {}),
            }
        )
    chart = {
        "id": f"fit-{rec.id}",
        "pm": rec.pm,
        "bs_min": lo,
        "bs_max": hi,
        "series": series,
        "t_star": None,
        "target": None,
        "chosen": None,
    }
    if solution is not None:
        chart["t_star"] = {
            "tp": solution.tp_max_mbps,
            "bs": solution.tp_max_bs_mib,
            "pm": solution.tp_max_pm,
            "cc": solution.tp_max_cc,
            "here": solution.tp_max_pm == rec.pm,
        }
        chart["target"] = solution.target_mbps
        if solution.opm == rec.pm:
            chart["chosen"] = {"bs": solution.obs_mib, "tp": solution.otp_mbps, "cc": solution.occ}
    return chart


# --- recommendations (Table 5) --------------------------------------------------------------------
def recommendations_page(session: Session, topology_id: int, limit: int, offset: int) -> dict:
    topology = inventory.get_topology(session, topology_id=topology_id)
    rows, total = recommendations.list_recommendations(
        session, topology_id=topology.id, limit=limit, offset=offset
    )
    latest, _ = recommendations.list_recommendations(session, topology_id=topology.id, limit=1)
    return {
        "topology": topology,
        "recommendations": rows,
        "total": total,
        "limit": limit,
        "offset": offset,
        "latest": latest[0] if latest else None,
        "active_campaign": campaign_store.active_campaign(session, topology_id=topology.id),
    }


def recommendation_page(session: Session, recommendation_id: int) -> dict:
    rec = recommendations.get_recommendation(session, recommendation_id=recommendation_id)
    topology = session.get(Topology, rec.topology_id)
    campaign = session.get(Campaign, rec.campaign_id) if rec.campaign_id else None
    return {"rec": rec, "topology": topology, "campaign": campaign}


# --- campaigns -----------------------------------------------------------------------------------
#: measurements listed on a campaign's page (newest first)
MEASUREMENT_ROWS = 50


def campaign_page(session: Session, campaign_id: int) -> dict:
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = session.get(Topology, campaign.topology_id)
    counts = session.execute(
        select(Measurement.phase, Measurement.status, func.count(Measurement.id))
        .where(Measurement.campaign_id == campaign.id)
        .group_by(Measurement.phase, Measurement.status)
    )
    by_phase: dict[str, dict[str, int]] = {}
    for phase, status, n in counts:
        by_phase.setdefault(phase, {})[status] = int(n)
    impact_n = session.scalar(
        select(func.count(ImpactFactor.id)).where(ImpactFactor.campaign_id == campaign.id)
    )
    fits_n = session.scalar(
        select(func.count(FitRecord.id)).where(FitRecord.campaign_id == campaign.id)
    )
    recs = session.scalar(
        select(func.count(Recommendation.id)).where(Recommendation.campaign_id == campaign.id)
    )
    # The latest probes, each with links to its raw outputs (the API serves the download).
    rows = list(session.scalars(
        select(Measurement).where(Measurement.campaign_id == campaign.id)
        .order_by(Measurement.id.desc()).limit(MEASUREMENT_ROWS)))
    names = artifact_store.artifact_names(session, measurement_ids=[r.id for r in rows])
    return {
        "campaign": campaign,
        "topology": topology,
        "progress": progress(campaign),
        "measurements": [{"row": r, "artifacts": names.get(r.id, [])} for r in rows],
        "measurement_rows": MEASUREMENT_ROWS,
        "by_phase": by_phase,
        "impact_count": impact_n or 0,
        "fit_count": fits_n or 0,
        "recommendation_count": recs or 0,
    }


def progress(campaign: Campaign) -> float:
    """probes_done / probes_total in 0..1 (the JSON API's definition)."""
    if not campaign.probes_total:
        return 0.0
    return min(1.0, campaign.probes_done / campaign.probes_total)
