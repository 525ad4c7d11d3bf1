"""Read-only queries behind the dashboard pages.

Everything here reads the database through the store (`service.store`, the dashboard's own reads
in `service.store.dashboard`). Answers are read as stored and shown as the API sends them
(`answer_of`): a stream campaign's answer is its stored recommendation, with its p99 chart and
frame charts from `service.flows.answers.stream_view` (computed there, never here), an adaptive
campaign's is its sweep's stored decision (`service.flows.answers.decided`); the Fits page's
other deltas are solved through the same flow as the API
(`service.flows.answers.campaign_answer.solve_campaign`), so a page never shows another buffer
than the answer a user got. Progress is the campaign's stored counters
(`flows.campaign.budget.progress`). Nothing here writes. Each function returns plain dicts/lists
that the templates render and that are safe to serialise to JSON for the charts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session

from api.schemas import RecommendationOut
from models import Campaign, FitRecord, ImpactFactor, Recommendation, Topology
from service.algorithm.impact import sign_changes
from service.flows.answers import stream_view
from service.flows.answers.campaign_answer import SolvedCampaign, solve_campaign
from service.flows.answers.decided import decided_question, decided_solution
from service.flows.campaign import budget
from service.flows.takeaways import figures, probe_series
from service.state import Selection
from service.state.selected import measured_selection
from service.store import applied, inventory, measurements, recommendations, results
from service.store import artifacts as artifact_store
from service.store import campaigns as campaign_store
from service.store import dashboard as reads

CURVE_POINTS = 120  # points per fitted curve drawn on the Fits page


# --- overview ------------------------------------------------------------------------------------
def overview(session: Session, limit: int = 200) -> dict:
    topologies, total = inventory.list_topologies(session, limit=limit)
    ids = [t.id for t in topologies]
    latest_rec = reads.latest_recommendations(session, ids)
    latest_campaign = reads.latest_campaigns(session, ids)
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
        "recommendation": answer_of(recs[0]) if recs else None,
        "recommendations_total": rec_total,
        "campaigns": campaigns,
        "campaigns_total": campaigns_total,
        "active_campaign": campaign_store.active_campaign(session, topology_id=topology.id),
        "applies": applied.list_applies(session, topology_id=topology.id, limit=5),
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
    selection: Selection | None = None  # the campaign's measured selection, once done
    history: list[HistoryRow] = field(default_factory=list)
    sign_change_count: int = 0
    chart: dict | None = None  # report page 2's figure: Ω bars with their intervals


def omega_chart(
    omegas: dict[str, dict[str, tuple[float, float | None, float | None, bool]]],
    subflows: list[str],
) -> dict | None:
    """The Impact page's figure, from the report's definition (`figures.omega_bars`)."""
    bars = figures.omega_bars(omegas, subflows)
    if not bars:
        return None
    spec = figures.omega_figure([b.omega for b in bars])
    return {
        "id": "omega-chart",
        "axes": spec.as_json(),
        "ccs": list(omegas),
        "subflows": list(dict.fromkeys(b.subflow for b in bars)),
        "bars": [
            {"cc": b.cc, "subflow": b.subflow, "omega": _finite(b.omega), "low": _finite(b.low),
             "high": _finite(b.high), "in_subset": b.in_subset}
            for b in bars
        ],
    }


def impact_page(session: Session, topology_id: int, campaign_id: int | None) -> ImpactView:
    topology = inventory.get_topology(session, topology_id=topology_id)
    campaign = _campaign_of(session, topology, campaign_id, ImpactFactor)
    with_impact = _campaigns_with(session, topology.id, ImpactFactor)
    names = [sf.name for sf in topology.subflows]
    view = ImpactView(
        topology=topology,
        campaign=campaign,
        campaigns=with_impact,
        selection=None if campaign is None else measured_selection(campaign),
        subflows=list(names),
        ccs=[],
        omega={},
        in_subset={},
        subsets=[],
    )
    if campaign is not None:
        intervals = results.omega_intervals(session, campaign_id=campaign.id)
        drawn: dict[str, dict[str, tuple]] = {}
        for result in results.impact_results(session, campaign_id=campaign.id):
            drawn[result.cc] = {
                sf: (w, intervals.get(result.cc, {}).get(sf, {}).get("low"),
                     intervals.get(result.cc, {}).get(sf, {}).get("high"), sf in result.subset)
                for sf, w in result.omegas.items()
            }
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
        view.chart = omega_chart(drawn, names)
    # History: every (subflow, CC) across the campaigns that measured impact factors.
    if with_impact:
        ids = [c.id for c in with_impact]
        column = {cid: k for k, cid in enumerate(ids)}
        rows = reads.omega_history(session, ids)
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
                changes = sign_changes(series)
                view.history.append(HistoryRow(subflow, cc, series, changes))
                view.sign_change_count += sum(changes)
    return view


# --- fits (Table 4, Figure 5) --------------------------------------------------------------------
def measured_points(session: Session, campaign_id: int) -> list[dict]:
    """Buffer-phase runs grouped per (PM, CC, buffer): mean, min, max goodput and run count."""
    return reads.measured_points(session, campaign_id)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def fits_page(
    session: Session, topology_id: int, campaign_id: int | None, delta: float | None
) -> dict:
    topology = inventory.get_topology(session, topology_id=topology_id)
    # by default the newest bulk campaign: a stream campaign's fits are of its paced goodput,
    # flat at the stream's rate, and say nothing of its answer (asked for by id, it is shown)
    campaign = (_campaign_of(session, topology, campaign_id, FitRecord) if campaign_id
                else reads.newest_bulk_campaign_with(session, topology.id, FitRecord)
                or _campaign_of(session, topology, None, FitRecord))
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
    solved = solve_campaign(session, campaign, page["delta"])
    decision = decided_question(campaign, page["delta"], None, None)
    if decision is not None and solved.solution is not None:
        # the question the adaptive sweep decided: the page shows its stored decision
        solved = replace(solved, solution=decided_solution(solved.solution, decision))
    page["solution"], page["solve_error"] = solved.solution, solved.error
    points = measured_points(session, campaign.id)
    page["charts"] = [_fit_chart(rec, solved, points) for rec in fits]
    # Table rows per fit, with the stored quality numbers.
    page["fit_rows"] = [
        {"fit": rec, "adj_r2": _finite(rec.adj_r2), "chart": chart,
         # every arm answered from its measured means: the regression's R² and p say nothing
         "measured": bool(chart["series"]) and all(
             s["kind"] == "measured" for s in chart["series"])}
        for rec, chart in zip(fits, page["charts"], strict=True)
    ]
    return page


def _parameters(curve) -> list[dict]:
    """A curve's own parameters, named as its model names them (none for measured means)."""
    names = {
        "quadratic": (("a", "a"), ("b", "b"), ("c", "c")),
        "saturating": (("plateau", "plateau_mbps"), ("knee", "knee_mib"),
                       ("sharpness", "sharpness")),
    }.get(curve.kind, ())
    return [{"name": label, "value": _finite(getattr(curve, attr))} for label, attr in names]


def _fit_chart(rec, solved: SolvedCampaign, points) -> dict:
    """One PM's chart: every CC's curve -- the one the answer was read off, whatever its kind,
    drawn through its own tp(bs) -- and measured points, T*, the target, the answer."""
    solution, lo, hi = solved.solution, solved.lo, solved.hi
    arms = {(a.pm, a.cc): a for a in solution.arms} if solution else {}
    xs = figures.fit_curve_xs(lo, hi, CURVE_POINTS)  # even on the log buffer axis
    series = []
    for curve in solved.curves_of(rec.pm):
        arm = arms.get((curve.pm, curve.cc))
        series.append(
            {
                "cc": curve.cc,
                "kind": curve.kind,
                "parameters": _parameters(curve),
                "curve": [[x, _finite(curve.tp(x))] for x in xs],
                "points": [p for p in points if p["pm"] == rec.pm and p["cc"] == curve.cc],
                "obs": arm.obs_mib if arm else None,
                "tp_at_obs": arm.tp_at_obs_mbps if arm else None,
                "peak_bs": arm.peak_bs_mib if arm else None,
                "peak_tp": arm.peak_tp_mbps if arm else None,
                "p_values": (rec.curve_p_values or {}).get(curve.cc, {}),
            }
        )
    chart = {
        "id": f"fit-{rec.id}",
        "axes": figures.FITS.as_json(),  # the report's axes (page 4)
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
        "latest": answer_of(latest[0]) if latest else None,
        "active_campaign": campaign_store.active_campaign(session, topology_id=topology.id),
    }


def recommendation_page(session: Session, recommendation_id: int) -> dict:
    rec = recommendations.get_recommendation(session, recommendation_id=recommendation_id)
    topology = reads.topology_or_none(session, rec.topology_id)
    campaign = reads.campaign_or_none(session, rec.campaign_id)
    return {"rec": answer_of(rec), "topology": topology, "campaign": campaign,
            "p99_chart": stream_view.p99_chart(rec)}


def answer_of(rec: Recommendation) -> RecommendationOut:
    """A stored answer as the API sends it (its `Outputs` typed): what a page shows of an
    answer is read by attribute, so a misspelt field fails the page (the templates'
    `StrictUndefined`) instead of showing nothing."""
    return RecommendationOut.of(rec)


# --- campaigns -----------------------------------------------------------------------------------
#: measurements listed on a campaign's page (newest first)
MEASUREMENT_ROWS = 50


def campaign_page(session: Session, campaign_id: int) -> dict:
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = reads.topology_or_none(session, campaign.topology_id)
    rows = reads.latest_measurements(session, campaign.id, MEASUREMENT_ROWS)
    names = artifact_store.artifact_names(session, measurement_ids=[r.id for r in rows])
    return {
        "campaign": campaign,
        "topology": topology,
        "progress": budget.progress(campaign),  # as stored: probes done of planned
        "measurements": [{"row": r, "artifacts": names.get(r.id, [])} for r in rows],
        "measurement_rows": MEASUREMENT_ROWS,
        "by_phase": reads.measurement_counts(session, campaign.id),
        "tools": reads.tool_counts(session, campaign.id),
        "stream": stream_view.campaign_stream(session, campaign),
        **reads.derived_counts(session, campaign.id),
    }


# --- one probe -----------------------------------------------------------------------------------
def probe_page(session: Session, measurement_id: int) -> dict:
    """A probe's figures: goodput over time, bytes per subflow, and the tool's per-interval RTT,
    cwnd and retransmits where its raw output has them (iperf3 `-J`)."""
    m = measurements.get_measurement(session, measurement_id=measurement_id)
    campaign = campaign_store.get_campaign(session, campaign_id=m.campaign_id)
    names = artifact_store.artifact_names(session, measurement_ids=[m.id]).get(m.id, [])
    charts = [c for c in (probe_series.goodput_chart(m.goodput_mbps or [], m.interval_s,
                                                     m.warmup_s),
                          probe_series.subflow_bytes_chart(m.subflow_bytes or {}))
              if c is not None]
    if probe_series.IPERF3_CLIENT in names:
        _, raw = artifact_store.get_artifact(session, measurement_id=m.id,
                                             name=probe_series.IPERF3_CLIENT)
        charts += probe_series.iperf3_charts(raw)
    return {
        "measurement": m,
        "campaign": campaign,
        "topology": reads.topology_or_none(session, campaign.topology_id),
        "artifacts": names,
        "charts": charts,
    }
