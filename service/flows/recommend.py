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

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import event
from sqlalchemy.orm import Session

from models import Campaign, Recommendation, Topology, utcnow
from probes.vocabulary import FULLMESH, PCDC

from ..algorithm import topology as algo
from ..algorithm.measured_curve import MeasuredCurve
from ..algorithm.regression import Sample
from ..algorithm.solver import (
    DEFAULT_BS_MAX_MIB,
    DEFAULT_BS_MIN_MIB,
    DEFAULT_DELTA,
    Solution,
    check_bounds,
    solve,
)
from ..algorithm.traditional import rto_from_rtt, traditional_buffer
from ..cache import LRU
from ..errors import Invalid
from ..settings import Settings
from ..store import campaigns as campaign_store
from ..store import inventory, measurements, recommendations, results
from .answer import Arm, Eq1, Outputs, TStar
from .dispatch import start_campaign
from .plan import CampaignParameters

_UNSET_MIN, _UNSET_MAX = 1e-12, 1e12  # stand-ins for a bound the request leaves out
STALE_AFTER_S = 30 * 24 * 3600  # data older than this is flagged "stale_data"


@dataclass
class Outcome:
    # None only when `reuse` found the answer stored: then `recommendation_id` names it.
    recommendation: Recommendation | None
    campaign_id: int | None  # provisional: the campaign that will calibrate the topology
    campaign_created: bool = False
    recommendation_id: int | None = None
    kind: str = ""

    def __post_init__(self) -> None:
        if self.recommendation is not None:
            self.recommendation_id = self.recommendation.id
            self.kind = self.recommendation.kind

    @property
    def provisional(self) -> bool:
        return self.kind == "provisional"


@dataclass(frozen=True)
class TopologySnapshot:
    """What an answer needs of a stored topology. `key` is its whole content (sites, ISPs,
    subflows with bandwidths and configured RTTs): any change gives another cache key."""

    id: int
    key: tuple
    spec: algo.Topology
    subflows: dict[str, tuple[float, float | None]]  # name -> (bandwidth kbit/s, configured RTT)

    @property
    def rtts_ms(self) -> dict[str, float]:
        return {name: rtt for name, (_bw, rtt) in self.subflows.items() if rtt is not None}


_snapshots: LRU[TopologySnapshot] = LRU(256)
_answers: LRU[CalibratedAnswer] = LRU(1024)
# Question (the answer's key and whether the data is stale) -> id of the row that answered it.
_stored_ids: LRU[int] = LRU(4096)


def snapshot_of(topology: Topology) -> TopologySnapshot:
    def site(row) -> tuple:
        return row.name, tuple((i.name, i.label, i.down_kbps, i.up_kbps) for i in row.isps)

    subflows = tuple((sf.name, sf.bandwidth_kbps, sf.rtt_ms) for sf in topology.subflows)
    return _snapshot(topology.id, site(topology.local_site), site(topology.remote_site), subflows)


def snapshot_by_id(session: Session, topology_id: int) -> TopologySnapshot:
    """The stored topology's snapshot from plain rows (NotFound for an unknown id)."""
    local, remote, subflows = inventory.topology_rows(session, topology_id=topology_id)
    return _snapshot(topology_id, local, remote, subflows)


def _snapshot(topology_id: int, local: tuple, remote: tuple, subflows: tuple) -> TopologySnapshot:
    def spec_site(name: str, isps: tuple) -> algo.Site:
        return algo.Site(name=name, isps=[
            algo.ISP(name=n, label=lb, down_kbps=d, up_kbps=u) for n, lb, d, u in isps
        ])

    key = (topology_id, local, remote, subflows)
    return _snapshots.get_or_make(
        key,
        lambda: TopologySnapshot(
            id=topology_id,
            key=key,
            spec=algo.Topology(local=spec_site(*local), remote=spec_site(*remote)),
            subflows={name: (bw, rtt) for name, bw, rtt in subflows},
        ),
    )


def recommend(
    session: Session,
    *,
    topology_id: int | None = None,
    topology: algo.Topology | None = None,
    rtts_ms: Mapping[str, float] | None = None,
    delta: float = DEFAULT_DELTA,
    bs_min_mib: float | None = None,
    bs_max_mib: float | None = None,
    queue_campaign: bool = True,
    settings: Settings | None = None,
    reuse: bool = False,
) -> Outcome:
    """Answer for a stored topology (by id) or an inline one (stored on the way); always stored.

    Buffer bounds left out: a calibrated answer is solved on the buffers its campaign measured
    (a fitted curve is not extrapolated), a provisional one reports the paper's 0.5..30 MiB.
    `queue_campaign`: a provisional answer queues a campaign (with `settings`' defaults).
    `reuse`: a calibrated question asked before returns the stored answer (no new row); the
    Outcome may then carry only its id.
    """
    _check_request(delta, bs_min_mib, bs_max_mib, topology_id, topology, rtts_ms)
    if topology is not None:
        snap = snapshot_of(inventory.ensure_topology(session, spec=topology, rtts_ms=rtts_ms))
    else:
        snap = snapshot_by_id(session, topology_id)
    flags: list[str] = []
    version = recommendations.latest_calibrated_version(session, topology_id=snap.id)
    if version is not None:
        question = (str(session.get_bind().engine.url), *version, delta, bs_min_mib, bs_max_mib,
                    snap.key)
        answer = _answers.get_or_make(
            question,
            lambda: _solve_calibrated(
                session, snap, campaign_store.get_campaign(session, campaign_id=version[0]),
                delta, bs_min_mib, bs_max_mib,
            ),
        )
        if answer.error is None:
            return _store_calibrated(session, snap, version[0], delta, answer, question, reuse)
        flags.append(answer.error)
    lo = DEFAULT_BS_MIN_MIB if bs_min_mib is None else bs_min_mib
    hi = DEFAULT_BS_MAX_MIB if bs_max_mib is None else bs_max_mib
    if queue_campaign and settings is None:
        raise ValueError("settings: a provisional answer that queues a campaign needs them")
    return _provisional(session, snap, delta, lo, hi, flags, settings if queue_campaign else None)


def _check_request(delta, bs_min, bs_max, topology_id, topology, rtts_ms) -> None:
    try:
        # A missing bound stands aside (the other is checked alone; the pair when both given).
        check_bounds(delta, _UNSET_MIN if bs_min is None else bs_min,
                     _UNSET_MAX if bs_max is None else bs_max)
    except ValueError as exc:
        field_name = str(exc).split(":", 1)[0]
        raise Invalid(str(exc), ("body", field_name)) from exc
    if (topology_id is None) == (topology is None):
        raise Invalid("give exactly one of topology_id and topology", ("body", "topology_id"))
    if topology_id is not None and rtts_ms:
        raise Invalid(
            "rtts_ms goes with an inline topology; use PATCH /topologies/{id}",
            ("body", "rtts_ms"),
        )


# --- calibrated ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibratedAnswer:
    """A calibrated answer without what depends on the clock (data age, stale flag).

    Cached per (campaign version, delta, bounds, topology content): a finished campaign's fits,
    impact factors and measurements do not change. Shared between requests: never mutated.
    """

    error: str | None = None
    solution: Solution | None = None
    outputs: Outputs = field(default_factory=Outputs)
    eq1: Eq1 | None = None
    provenance: dict = field(default_factory=dict)
    flags_before_stale: tuple[str, ...] = ()
    flags_after_stale: tuple[str, ...] = ()
    newest_at: datetime | None = None
    bs_min_mib: float | None = None  # the bounds it was solved on (within the measured range)
    bs_max_mib: float | None = None


def _solve_calibrated(session, snap, campaign, delta, bs_min, bs_max) -> CalibratedAnswer:
    fits = results.list_fits(session, campaign_id=campaign.id, model_kind=campaign.model_kind)
    curves = [c for rec in fits for c in results.fit_curves(rec)]
    flags: list[str] = []
    measured_lo, measured_hi = campaign_store.buffer_range(campaign)
    lo = measured_lo if bs_min is None else max(bs_min, measured_lo)
    hi = measured_hi if bs_max is None else min(bs_max, measured_hi)
    if (lo, hi) != (bs_min, bs_max) and (bs_min, bs_max) != (None, None):
        flags.append(f"buffer_range_limited_to_measured:{measured_lo:g}-{measured_hi:g}")
    measured = [  # an OTP is a promise: never above what was measured without saying so
        Sample(m.pm, m.cc, m.bs_mib, m.mean_goodput_mbps)
        for m in measurements.ok_measurements(session, campaign_id=campaign.id, phase="buffer")
        if m.mean_goodput_mbps is not None and lo <= m.bs_mib <= hi
    ]
    if campaign.mode == "adaptive":  # decided on measured buffers: the answer is read off them
        curves = _measured_curves(session, campaign, curves, measured)
    try:
        solution = solve(curves, delta, lo, hi, measured=measured)
    except ValueError as exc:
        return CalibratedAnswer(error=f"calibration_unusable: campaign {campaign.id}: {exc}")
    flags.extend(solution.flags)
    impacts = {r.cc: r for r in results.impact_results(session, campaign_id=campaign.id)}
    used, standby = _subflows_used(snap, solution, impacts, flags)
    unsettled = (campaign.notes or {}).get("unsettled_omegas", {}).get(solution.occ, [])
    if unsettled:
        flags.append("omega_unsettled:" + ",".join(unsettled))
    summary = measurements.summarize(session, campaign_id=campaign.id)
    eq1 = traditional_eq1(snap, used, summary, solution.obs_mib)
    if not eq1.available:
        flags.append("eq1_rtt_unknown")
    after_stale = [f"quality_gate_failed:{rec.pm}" for rec in fits if not rec.gate_passed]
    # What the campaign could not measure (failed probes, dropped CCs, ...) goes with every answer.
    after_stale.extend(campaign_store.flags(campaign))
    outputs = _outputs(solution, used, standby, _model_reasons(fits))
    outputs.unsettled_omegas = list(unsettled)
    return CalibratedAnswer(
        solution=solution,
        outputs=outputs,
        eq1=eq1,
        provenance=_provenance(campaign, fits, summary),
        flags_before_stale=tuple(flags),
        flags_after_stale=tuple(after_stale),
        newest_at=summary.newest_at or campaign.finished_at,
        bs_min_mib=lo,
        bs_max_mib=hi,
    )


def _measured_curves(session, campaign, fitted, measured) -> list:
    """An adaptive campaign's arms as their measured means (`MeasuredCurve`): the same rule as
    its decision, the smallest measured buffer whose mean reaches (1 - delta) T*."""
    same = {c.arm: c.same_as_fullmesh for c in fitted}
    impacts = {r.cc: r for r in results.impact_results(session, campaign_id=campaign.id)}
    by_arm: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for m in measured:
        by_arm.setdefault((m.pm, m.cc), []).append((m.bs_mib, m.tp_mbps))
    return [
        MeasuredCurve.from_points(
            pm, cc, points,
            same.get((pm, cc), pm == "PCDC" and cc in impacts and impacts[cc].same_as_fullmesh),
        )
        for (pm, cc), points in by_arm.items()
    ]


def _subflows_used(snap, solution, impacts, flags) -> tuple[list[str], list[str]]:
    """The subflows the answer runs and, for PCDC, the standby ones best Omega first."""
    names = snap.spec.subflow_names()
    if solution.opm == FULLMESH:
        return names, []
    if solution.occ not in impacts:
        flags.append("pcdc_subset_unknown")
        return names, []
    impact = impacts[solution.occ]
    return [n for n in impact.subset if n in names], impact.standby


def _model_reasons(fits) -> dict[tuple[str, str], str]:
    """(PM, CC) -> which model the arm's curve is and why (from the stored per-arm fits)."""
    return {
        (rec.pm, arm["cc"]): f"{arm.get('model')}: {arm.get('reason')}"
        for rec in fits
        for arm in (rec.arms or [])
    }


def _outputs(solution: Solution, used: list[str], standby: list[str], reasons) -> Outputs:
    return Outputs(
        t_star=TStar(
            tp_mbps=solution.tp_max_mbps,
            bs_mib=solution.tp_max_bs_mib,
            pm=solution.tp_max_pm,
            cc=solution.tp_max_cc,
        ),
        target_mbps=solution.target_mbps,
        arms=[
            Arm(
                pm=a.pm,
                cc=a.cc,
                peak_bs_mib=a.peak_bs_mib,
                peak_tp_mbps=a.peak_tp_mbps,
                obs_mib=a.obs_mib,
                tp_at_obs_mbps=a.tp_at_obs_mbps,
                same_as_fullmesh=a.same_as_fullmesh,
                kind=a.kind,
                model_reason=reasons.get((a.pm, a.cc)),
                measured_obs_mib=a.measured_obs_mib,
                measured_max_mbps=a.measured_max_mbps,
            )
            for a in solution.arms
        ],
        subflows_used=used,
        standby_subflows=standby,
        otp_fitted_mbps=solution.otp_fitted_mbps,
        measured_obs_mib=solution.measured_obs_mib,
    )


def _provenance(campaign: Campaign, fits, summary: measurements.MeasurementSummary) -> dict:
    return {
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
        "data_age_s": None,
        "warnings": [f"{rec.pm}: {w}" for rec in fits for w in rec.warnings],
    }


def _store_calibrated(
    session, snap, campaign_id, delta, answer: CalibratedAnswer, question, reuse: bool
) -> Outcome:
    """A new row for the answer, or with `reuse` the stored answer to the same question (issue
    14: a repeated question cost an INSERT and a COMMIT every time)."""
    now = utcnow()
    age = (now - answer.newest_at).total_seconds() if answer.newest_at else None
    flags = list(answer.flags_before_stale)
    stale = age is not None and age > STALE_AFTER_S
    if stale:
        flags.append("stale_data")
    flags.extend(answer.flags_after_stale)
    inputs = _inputs(snap, delta, answer.bs_min_mib, answer.bs_max_mib)
    key = (*question, stale)
    if reuse:
        stored = _stored_answer(session, key, campaign_id, inputs, flags)
        if stored is not None:
            return stored
    rec = recommendations.add_recommendation(
        session,
        topology_id=snap.id,
        campaign_id=campaign_id,
        kind="calibrated",
        delta=delta,
        bs_min_mib=answer.bs_min_mib,
        bs_max_mib=answer.bs_max_mib,
        inputs=inputs,
        opm=answer.solution.opm,
        occ=answer.solution.occ,
        obs_mib=answer.solution.obs_mib,
        otp_mbps=answer.solution.otp_mbps,
        tp_max_mbps=answer.solution.tp_max_mbps,
        outputs=answer.outputs.model_dump(mode="json"),
        traditional=answer.eq1.model_dump(mode="json"),
        provenance={**answer.provenance, "data_age_s": age},
        quality_flags=flags,
        created_at=now,
    )
    if reuse:  # remembered once committed: a rolled-back row must never be handed out
        rec_id = rec.id
        event.listen(session, "after_commit", lambda _s: _stored_ids.put(key, rec_id), once=True)
    return Outcome(recommendation=rec, campaign_id=campaign_id)


def _stored_answer(session, key, campaign_id, inputs, flags) -> Outcome | None:
    """This process's committed answer to the question, else the one another process stored
    (same campaign, inputs and flags)."""
    cached = _stored_ids.get(key)
    if cached is not None:
        return Outcome(recommendation=None, campaign_id=campaign_id, recommendation_id=cached,
                       kind="calibrated")
    rec = recommendations.find_calibrated(
        session, campaign_id=campaign_id, inputs=inputs, quality_flags=flags
    )
    if rec is None:
        return None
    _stored_ids.put(key, rec.id)
    return Outcome(recommendation=rec, campaign_id=campaign_id)


# --- Eq. 1 ---------------------------------------------------------------------------------------
def traditional_eq1(
    topology: TopologySnapshot,
    used: list[str],
    summary: measurements.MeasurementSummary | None,
    obs_mib: float | None,
) -> Eq1:
    """Eq. 1 over the used subflows, or why it is unknown. Measured RTT/RTO win over configured."""
    rtts, rtos, bws, sources, missing = [], [], [], set(), []
    for name in used:
        bandwidth_kbps, configured_rtt_ms = topology.subflows[name]
        measured = summary.rtt_ms.get(name) if summary else None
        rtt_ms = measured if measured is not None else configured_rtt_ms
        if rtt_ms is None:
            missing.append(name)
            continue
        sources.add("measurements" if measured is not None else "topology")
        rto_measured = summary.rto_ms.get(name) if summary else None
        rtts.append(rtt_ms / 1000.0)
        rtos.append(rto_measured / 1000.0 if rto_measured else rto_from_rtt(rtt_ms / 1000.0))
        bws.append(bandwidth_kbps)
    if missing:
        return Eq1(
            available=False,
            subflows=used,
            reason=(
                f"RTT unknown for subflows {missing}: no measurement recorded one and the "
                "topology has none configured (set rtts_ms on the topology)"
            ),
            missing_rtt_subflows=missing,
        )
    tb = traditional_buffer(rtts, rtos, bws)
    return Eq1(
        available=True,
        subflows=used,
        buffer_mib=tb.buffer_mib,
        fallback_mib=tb.fallback_mib,
        obs_ratio=tb.ratio(obs_mib) if obs_mib is not None and tb.buffer_mib > 0 else None,
        rtt_max_s=tb.rtt_max_s,
        rto_max_s=tb.rto_max_s,
        bandwidth_sum_kbps=tb.bandwidth_sum_kbps,
        rtt_source="+".join(sorted(sources)),
        rto_source="measurements" if summary and summary.rto_ms else "RFC 6298 from RTT",
    )


# --- provisional ---------------------------------------------------------------------------------
def _provisional(session, snap, delta, lo, hi, flags, settings: Settings | None) -> Outcome:
    """The paper's rules; with `settings`, a campaign is queued (or the active one reused)."""
    spec = snap.spec
    homogeneous = spec.is_homogeneous()
    opm = FULLMESH if homogeneous else PCDC
    names = spec.subflow_names()
    eq1 = traditional_eq1(snap, names, None, None)
    notes = _provisional_notes(opm, homogeneous)
    obs = None
    if eq1.available:
        obs = eq1.fallback_mib
        eq1.obs_ratio = 0.5
        notes.append("OBS = 50 % of the traditional buffer (Eq. 1), the paper's fallback")
    else:
        flags.append("eq1_rtt_unknown")
        notes.append("OBS unknown: Eq. 1 needs the subflows' RTTs")
    flags.append("provisional")
    campaign, created = _campaign_for(session, snap.id, delta, settings)
    outputs = Outputs(subflows_used=names, notes=notes)
    if campaign is not None:
        outputs.poll_url = f"/campaigns/{campaign.id}"
    rec = recommendations.add_recommendation(
        session,
        topology_id=snap.id,
        campaign_id=campaign.id if campaign else None,
        kind="provisional",
        delta=delta,
        bs_min_mib=lo,
        bs_max_mib=hi,
        inputs=_inputs(snap, delta, lo, hi),
        opm=opm,
        occ=None,
        obs_mib=obs,
        otp_mbps=None,
        tp_max_mbps=None,
        outputs=outputs.model_dump(mode="json"),
        traditional=eq1.model_dump(mode="json"),
        provenance={
            "source": "provisional",
            "rule": "homogeneous -> FullMesh, heterogeneous -> PCDC; buffer 50 % of Eq. 1",
            "homogeneous": homogeneous,
            "campaign_id": campaign.id if campaign else None,
            "campaign_state": campaign.state if campaign else None,
            "fit_ids": [],
            "measurement_count": 0,
            "run_count": 0,
            "data_age_s": None,
            "warnings": [],
        },
        quality_flags=flags,
        created_at=utcnow(),
    )
    return Outcome(
        recommendation=rec,
        campaign_id=campaign.id if campaign else None,
        campaign_created=created,
    )


def _provisional_notes(opm: str, homogeneous: bool) -> list[str]:
    notes = [
        f"provisional: no calibrated data yet; {opm} because the topology is "
        f"{'homogeneous' if homogeneous else 'heterogeneous'} (paper, Section 5.3)",
        "OCC: the paper gives no rule without measurements; keep the kernel's default until "
        "the campaign finishes",
    ]
    if opm == PCDC:
        notes.append("PCDC's subset SP* needs impact factors; until then it uses every subflow")
    return notes


def _campaign_for(session, topology_id, delta, settings) -> tuple[Campaign | None, bool]:
    """The topology's active campaign, or a new one when `settings` allow queueing."""
    campaign = campaign_store.active_campaign(session, topology_id=topology_id)
    if campaign is not None or settings is None:
        return campaign, False
    campaign = start_campaign(
        session,
        topology_id=topology_id,
        params=CampaignParameters(delta=delta),
        reason="recommendation",
        settings=settings,
    )
    return campaign, True


def _inputs(snap: TopologySnapshot, delta: float, bs_min: float, bs_max: float) -> dict:
    return {
        "topology_id": snap.id,
        "topology": snap.spec.model_dump(mode="json"),
        "rtts_ms": snap.rtts_ms,
        "delta": delta,
        "bs_min_mib": bs_min,
        "bs_max_mib": bs_max,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
