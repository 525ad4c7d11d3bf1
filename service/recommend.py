"""The main job: a topology and delta in, OPM / OCC / OBS / OTP out, with its provenance.

Calibrated: the topology's latest finished campaign with fits gives the curves; `solve` gives the
answer; Eq. 1 is computed over the subflows the answer uses, from the measured RTT/RTO where the
campaign stored them, else from the RTTs configured on the topology, else it is reported unknown.

Provisional (no calibrated data yet): the paper's rules (Section 5.3 and 6) -- FullMesh for a
homogeneous topology, PCDC for a heterogeneous one, buffer 50 % of Eq. 1 -- and a campaign is
queued (or the one already queued/running is reused) so that a later request gets a calibrated
answer. Every answer is stored.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import Campaign, FitRecord, Measurement, Recommendation, Topology, utcnow

from .algorithm import topology as algo
from .algorithm.curve import FULLMESH, PCDC
from .algorithm.solver import (
    DEFAULT_BS_MAX_MIB,
    DEFAULT_BS_MIN_MIB,
    DEFAULT_DELTA,
    check_bounds,
    solve,
)
from .algorithm.traditional import rto_from_rtt, traditional_buffer
from .campaigns import (
    active_campaign,
    create_campaign,
    fit_curves,
    impact_results,
    latest_calibrated_campaign,
    list_fits,
)
from .dispatch import dispatch_campaign
from .errors import Invalid
from .inventory import ensure_topology, get_topology, topology_spec
from .settings import Settings, get_settings

STALE_AFTER_S = 30 * 24 * 3600  # data older than this is flagged "stale_data"


@dataclass
class Outcome:
    recommendation: Recommendation
    campaign: Campaign | None  # provisional: the campaign that will calibrate the topology
    campaign_created: bool = False

    @property
    def provisional(self) -> bool:
        return self.recommendation.kind == "provisional"


@dataclass(frozen=True)
class CampaignSummary:
    """What a finished campaign's measurements say, computed once per campaign version."""

    measurement_count: int
    buffer_measurement_count: int
    run_count: int
    oldest_at: datetime | None
    newest_at: datetime | None
    rtt_ms: dict[str, float] = field(default_factory=dict)
    rto_ms: dict[str, float] = field(default_factory=dict)


_summary_cache: OrderedDict[tuple, CampaignSummary] = OrderedDict()
_summary_lock = threading.Lock()
_SUMMARY_CACHE_SIZE = 256


def campaign_summary(session: Session, campaign: Campaign) -> CampaignSummary:
    bind = session.get_bind()
    key = (str(bind.engine.url), campaign.id, campaign.updated_at, campaign.probes_done)
    with _summary_lock:
        if key in _summary_cache:
            _summary_cache.move_to_end(key)
            return _summary_cache[key]
    ok = (Measurement.campaign_id == campaign.id, Measurement.status == "ok")
    count, oldest, newest = session.execute(
        select(
            func.count(Measurement.id),
            func.min(Measurement.started_at),
            func.max(Measurement.finished_at),
        ).where(*ok)
    ).one()
    buffer_count, runs = session.execute(
        select(func.count(Measurement.id), func.count(func.distinct(Measurement.run))).where(
            *ok, Measurement.phase == "buffer"
        )
    ).one()
    sums: dict[str, dict[str, list[float]]] = {"rtt": {}, "rto": {}}
    rows = session.execute(select(Measurement.rtt_ms, Measurement.rto_ms).where(*ok))
    for rtt, rto in rows:
        for kind, values in (("rtt", rtt), ("rto", rto)):
            for name, value in (values or {}).items():
                if isinstance(value, int | float) and value > 0:
                    sums[kind].setdefault(name, []).append(float(value))
    summary = CampaignSummary(
        measurement_count=count or 0,
        buffer_measurement_count=buffer_count or 0,
        run_count=runs or 0,
        oldest_at=oldest,
        newest_at=newest,
        rtt_ms={k: sum(v) / len(v) for k, v in sums["rtt"].items()},
        rto_ms={k: sum(v) / len(v) for k, v in sums["rto"].items()},
    )
    with _summary_lock:
        _summary_cache[key] = summary
        while len(_summary_cache) > _SUMMARY_CACHE_SIZE:
            _summary_cache.popitem(last=False)
    return summary


def eq1(
    topology: Topology, used: list[str], summary: CampaignSummary | None, obs_mib: float | None
) -> dict:
    """Eq. 1 over the used subflows, or why it is unknown. Measured RTT/RTO win over configured."""
    by_name = {sf.name: sf for sf in topology.subflows}
    rtts, rtos, bws, sources, missing = [], [], [], set(), []
    for name in used:
        sf = by_name[name]
        measured = summary.rtt_ms.get(name) if summary else None
        if measured is not None:
            rtt_ms, source = measured, "measurements"
        elif sf.rtt_ms is not None:
            rtt_ms, source = sf.rtt_ms, "topology"
        else:
            missing.append(name)
            continue
        rto_measured = summary.rto_ms.get(name) if summary else None
        rtts.append(rtt_ms / 1000.0)
        rtos.append(rto_measured / 1000.0 if rto_measured else rto_from_rtt(rtt_ms / 1000.0))
        bws.append(sf.bandwidth_kbps)
        sources.add(source)
    base = {"subflows": used}
    if missing:
        return {
            **base,
            "available": False,
            "reason": (
                f"RTT unknown for subflows {missing}: no measurement recorded one and the topology "
                "has none configured (set rtts_ms on the topology)"
            ),
            "missing_rtt_subflows": missing,
        }
    tb = traditional_buffer(rtts, rtos, bws)
    return {
        **base,
        "available": True,
        "buffer_mib": tb.buffer_mib,
        "fallback_mib": tb.fallback_mib,
        "obs_ratio": tb.ratio(obs_mib) if obs_mib is not None and tb.buffer_mib > 0 else None,
        "rtt_max_s": tb.rtt_max_s,
        "rto_max_s": tb.rto_max_s,
        "bandwidth_sum_kbps": tb.bandwidth_sum_kbps,
        "rtt_source": "+".join(sorted(sources)),
        "rto_source": "measurements" if summary and summary.rto_ms else "RFC 6298 from RTT",
    }


def _inputs(topology: Topology, delta: float, bs_min: float, bs_max: float) -> dict:
    return {
        "topology_id": topology.id,
        "topology": topology_spec(topology).model_dump(mode="json"),
        "rtts_ms": {sf.name: sf.rtt_ms for sf in topology.subflows if sf.rtt_ms is not None},
        "delta": delta,
        "bs_min_mib": bs_min,
        "bs_max_mib": bs_max,
    }


def recommend(
    session: Session,
    *,
    topology_id: int | None = None,
    topology: algo.Topology | None = None,
    rtts_ms: Mapping[str, float] | None = None,
    delta: float = DEFAULT_DELTA,
    bs_min_mib: float = DEFAULT_BS_MIN_MIB,
    bs_max_mib: float = DEFAULT_BS_MAX_MIB,
    settings: Settings | None = None,
) -> Outcome:
    """Answer for a stored topology (by id) or an inline one (stored on the way); always stored."""
    settings = settings or get_settings()
    try:
        check_bounds(delta, bs_min_mib, bs_max_mib)
    except ValueError as exc:
        field_name = str(exc).split(":", 1)[0]
        raise Invalid(str(exc), ("body", field_name)) from exc
    if (topology_id is None) == (topology is None):
        raise Invalid("give exactly one of topology_id and topology", ("body", "topology_id"))
    if topology is not None:
        row = ensure_topology(session, topology, rtts_ms)
    else:
        row = get_topology(session, topology_id)
        if rtts_ms:
            raise Invalid(
                "rtts_ms goes with an inline topology; use PATCH /topologies/{id}",
                ("body", "rtts_ms"),
            )
    campaign = latest_calibrated_campaign(session, row.id)
    flags: list[str] = []
    if campaign is not None:
        outcome = _calibrated(session, row, campaign, delta, bs_min_mib, bs_max_mib, flags)
        if outcome is not None:
            return outcome
    return _provisional(session, row, delta, bs_min_mib, bs_max_mib, flags, settings)


def _calibrated(
    session: Session,
    topology: Topology,
    campaign: Campaign,
    delta: float,
    bs_min: float,
    bs_max: float,
    flags: list[str],
) -> Outcome | None:
    fits: list[FitRecord] = list_fits(session, campaign.id, campaign.model_kind)
    curves = [c for rec in fits for c in fit_curves(rec)]
    try:
        solution = solve(curves, delta, bs_min, bs_max)
    except ValueError as exc:
        flags.append(f"calibration_unusable: campaign {campaign.id}: {exc}")
        return None
    names = topology_spec(topology).subflow_names()
    impacts = {r.cc: r for r in impact_results(session, campaign.id)}
    if solution.opm == FULLMESH:
        used = names
    elif solution.occ in impacts:
        used = [n for n in impacts[solution.occ].subset if n in names]
    else:
        used = names
        flags.append("pcdc_subset_unknown")
    summary = campaign_summary(session, campaign)
    traditional = eq1(topology, used, summary, solution.obs_mib)
    if not traditional["available"]:
        flags.append("eq1_rtt_unknown")
    now = utcnow()
    newest = summary.newest_at or campaign.finished_at
    age = (now - newest).total_seconds() if newest else None
    if age is not None and age > STALE_AFTER_S:
        flags.append("stale_data")
    warnings = []
    for rec in fits:
        if not rec.gate_passed:
            flags.append(f"quality_gate_failed:{rec.pm}")
        warnings.extend(f"{rec.pm}: {w}" for w in rec.warnings)
    provenance = {
        "source": "calibrated",
        "campaign_id": campaign.id,
        "campaign_finished_at": _iso(campaign.finished_at),
        "model_kind": campaign.model_kind,
        "fit_ids": [rec.id for rec in fits],
        "fits": [
            {
                "id": rec.id,
                "pm": rec.pm,
                "n": rec.n,
                "r2": rec.r2,
                "adj_r2": rec.adj_r2,
                "buffer_p_value": rec.buffer_p_value,
                "gate_passed": rec.gate_passed,
            }
            for rec in fits
        ],
        "measurement_count": summary.measurement_count,
        "buffer_measurement_count": summary.buffer_measurement_count,
        "run_count": summary.run_count,
        "oldest_measurement_at": _iso(summary.oldest_at),
        "newest_measurement_at": _iso(summary.newest_at),
        "data_age_s": age,
        "warnings": warnings,
    }
    outputs = {
        "t_star": {
            "tp_mbps": solution.tp_max_mbps,
            "bs_mib": solution.tp_max_bs_mib,
            "pm": solution.tp_max_pm,
            "cc": solution.tp_max_cc,
        },
        "target_mbps": solution.target_mbps,
        "arms": [
            {
                "pm": a.pm,
                "cc": a.cc,
                "peak_bs_mib": a.peak_bs_mib,
                "peak_tp_mbps": a.peak_tp_mbps,
                "obs_mib": a.obs_mib,
                "tp_at_obs_mbps": a.tp_at_obs_mbps,
                "same_as_fullmesh": a.same_as_fullmesh,
            }
            for a in solution.arms
        ],
        "subflows_used": used,
        "standby_subflows": (
            impacts[solution.occ].standby
            if solution.opm == PCDC and solution.occ in impacts
            else []
        ),
        "notes": [],
    }
    rec = Recommendation(
        topology_id=topology.id,
        campaign_id=campaign.id,
        kind="calibrated",
        delta=delta,
        bs_min_mib=bs_min,
        bs_max_mib=bs_max,
        inputs=_inputs(topology, delta, bs_min, bs_max),
        opm=solution.opm,
        occ=solution.occ,
        obs_mib=solution.obs_mib,
        otp_mbps=solution.otp_mbps,
        tp_max_mbps=solution.tp_max_mbps,
        outputs=outputs,
        traditional=traditional,
        provenance=provenance,
        quality_flags=flags,
        created_at=now,
    )
    session.add(rec)
    session.flush()
    return Outcome(recommendation=rec, campaign=campaign)


def _provisional(
    session: Session,
    topology: Topology,
    delta: float,
    bs_min: float,
    bs_max: float,
    flags: list[str],
    settings: Settings,
) -> Outcome:
    spec = topology_spec(topology)
    homogeneous = spec.is_homogeneous()
    opm = FULLMESH if homogeneous else PCDC
    names = spec.subflow_names()
    traditional = eq1(topology, names, None, None)
    notes = [
        f"provisional: no calibrated data yet; {opm} because the topology is "
        f"{'homogeneous' if homogeneous else 'heterogeneous'} (paper, Section 5.3)",
        "OCC: the paper gives no rule without measurements; keep the kernel's default until "
        "the campaign finishes",
    ]
    if opm == PCDC:
        notes.append("PCDC's subset SP* needs impact factors; until then it uses every subflow")
    obs = None
    if traditional["available"]:
        obs = traditional["fallback_mib"]
        traditional["obs_ratio"] = 0.5
        notes.append("OBS = 50 % of the traditional buffer (Eq. 1), the paper's fallback")
    else:
        flags.append("eq1_rtt_unknown")
        notes.append("OBS unknown: Eq. 1 needs the subflows' RTTs")
    flags.append("provisional")
    campaign = active_campaign(session, topology.id)
    created = campaign is None
    if created:
        campaign = create_campaign(
            session, topology.id, delta=delta, reason="recommendation", settings=settings
        )
        dispatch_campaign(session, campaign.id, settings)
    now = utcnow()
    provenance = {
        "source": "provisional",
        "rule": "homogeneous -> FullMesh, heterogeneous -> PCDC; buffer 50 % of Eq. 1",
        "homogeneous": homogeneous,
        "campaign_id": campaign.id,
        "campaign_state": campaign.state,
        "fit_ids": [],
        "measurement_count": 0,
        "run_count": 0,
        "data_age_s": None,
        "warnings": [],
    }
    outputs = {
        "t_star": None,
        "target_mbps": None,
        "arms": [],
        "subflows_used": names,
        "standby_subflows": [],
        "notes": notes,
        "poll_url": f"/campaigns/{campaign.id}",
    }
    rec = Recommendation(
        topology_id=topology.id,
        campaign_id=campaign.id,
        kind="provisional",
        delta=delta,
        bs_min_mib=bs_min,
        bs_max_mib=bs_max,
        inputs=_inputs(topology, delta, bs_min, bs_max),
        opm=opm,
        occ=None,
        obs_mib=obs,
        otp_mbps=None,
        tp_max_mbps=None,
        outputs=outputs,
        traditional=traditional,
        provenance=provenance,
        quality_flags=flags,
        created_at=now,
    )
    session.add(rec)
    session.flush()
    return Outcome(recommendation=rec, campaign=campaign, campaign_created=created)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def get_recommendation(session: Session, recommendation_id: int) -> Recommendation:
    from .errors import NotFound

    rec = session.get(Recommendation, recommendation_id)
    if rec is None:
        raise NotFound(f"recommendation {recommendation_id} not found")
    return rec


def list_recommendations(
    session: Session,
    topology_id: int | None = None,
    kind: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Recommendation], int]:
    query = select(Recommendation)
    if topology_id is not None:
        query = query.where(Recommendation.topology_id == topology_id)
    if kind is not None:
        query = query.where(Recommendation.kind == kind)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Recommendation.id.desc()).limit(limit).offset(offset))
    return list(rows), total
