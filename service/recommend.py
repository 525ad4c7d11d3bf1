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
from typing import Any

from sqlalchemy import bindparam, func, insert, literal, select
from sqlalchemy.orm import Session, aliased, make_transient_to_detached

from models import (
    ISP,
    Campaign,
    FitRecord,
    ImpactFactor,
    Measurement,
    Recommendation,
    Site,
    Subflow,
    Topology,
    utcnow,
)

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
    buffer_range,
    campaign_flags,
    create_campaign,
    fit_curves,
    impact_results,
    list_fits,
)
from .dispatch import dispatch_campaign
from .errors import Invalid
from .inventory import ensure_topology, get_topology
from .settings import Settings, get_settings

_UNSET_MIN, _UNSET_MAX = 1e-12, 1e12  # stand-ins for a bound the request leaves out
STALE_AFTER_S = 30 * 24 * 3600  # data older than this is flagged "stale_data"


@dataclass
class Outcome:
    recommendation: Recommendation
    campaign_id: int | None  # provisional: the campaign that will calibrate the topology
    campaign_created: bool = False
    _campaign: Campaign | None = field(default=None, repr=False)
    _session: Session | None = field(default=None, repr=False)

    @property
    def provisional(self) -> bool:
        return self.recommendation.kind == "provisional"

    @property
    def campaign(self) -> Campaign | None:
        """The campaign row, loaded on first use (a calibrated answer from the cache has none)."""
        if self._campaign is None and self.campaign_id is not None and self._session is not None:
            self._campaign = self._session.get(Campaign, self.campaign_id)
        return self._campaign


class _LRU:
    """A small thread-safe LRU dict. Values are shared between requests: never mutate them."""

    def __init__(self, size: int) -> None:
        self._data: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def get(self, key: tuple) -> Any:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


@dataclass(frozen=True)
class TopologySnapshot:
    """What an answer needs of a stored topology: read in one query, built once per content.

    `key` is the full content (sites, ISPs, subflows with their bandwidths and configured RTTs), so
    any change to the topology gives another snapshot and another cache key.
    """

    id: int
    key: tuple
    spec: algo.Topology
    subflows: dict[str, tuple[float, float | None]]  # name -> (bandwidth kbit/s, configured RTT ms)
    spec_json: dict  # spec.model_dump(mode="json"): the "topology" of the stored inputs
    rtts_ms: dict[str, float]


@dataclass(frozen=True)
class CampaignRef:
    """The latest calibrated campaign of a topology, with what identifies its stored results."""

    id: int
    finished_at: datetime | None
    updated_at: datetime | None
    probes_done: int | None
    model_kind: str
    fits_count: int
    fits_max_id: int | None
    impacts_count: int
    impacts_max_id: int | None


_snapshots = _LRU(256)


def _isp_key(isp) -> tuple:
    return (isp.name, isp.label, isp.down_kbps, isp.up_kbps)


def _site(name: str, isps: tuple) -> algo.Site:
    return algo.Site(
        name=name,
        isps=[algo.ISP(name=n, label=lb, down_kbps=d, up_kbps=u) for n, lb, d, u in isps],
    )


def _snapshot(topology_id: int, local: tuple, remote: tuple, subflows: tuple) -> TopologySnapshot:
    """local/remote: (site name, ((isp name, label, down, up), ...)); subflows: (name, bw, rtt)."""
    key = (topology_id, local, remote, subflows)
    snap = _snapshots.get(key)
    if snap is None:
        spec = algo.Topology(local=_site(*local), remote=_site(*remote))
        snap = TopologySnapshot(
            id=topology_id,
            key=key,
            spec=spec,
            subflows={name: (bw, rtt) for name, bw, rtt in subflows},
            spec_json=spec.model_dump(mode="json"),
            rtts_ms={name: rtt for name, _bw, rtt in subflows if rtt is not None},
        )
        _snapshots.put(key, snap)
    return snap


def snapshot_of(topology: Topology) -> TopologySnapshot:
    """The snapshot of an ORM topology row (inline topologies, and the fallback path)."""
    return _snapshot(
        topology.id,
        (topology.local_site.name, tuple(_isp_key(i) for i in topology.local_site.isps)),
        (topology.remote_site.name, tuple(_isp_key(i) for i in topology.remote_site.isps)),
        tuple((sf.name, sf.bandwidth_kbps, sf.rtt_ms) for sf in topology.subflows),
    )


def _latest_calibrated_query(topology_id):
    """`campaigns.latest_calibrated_campaign` as plain columns, with its fits'/impacts' versions.

    Fits and impact factors are replaced by delete + insert (new ids), so (count, max id) changes
    whenever they do; a campaign's own row changes bump its updated_at.
    """
    fits = (FitRecord.campaign_id == Campaign.id, FitRecord.model_kind == Campaign.model_kind)
    impacts = ImpactFactor.campaign_id == Campaign.id
    return (
        select(
            Campaign.id.label("campaign_id"),
            Campaign.finished_at,
            Campaign.updated_at,
            Campaign.probes_done,
            Campaign.model_kind,
            select(func.count(FitRecord.id)).where(*fits).scalar_subquery().label("fits_count"),
            select(func.max(FitRecord.id)).where(*fits).scalar_subquery().label("fits_max_id"),
            select(func.count(ImpactFactor.id)).where(impacts).scalar_subquery().label("imp_count"),
            select(func.max(ImpactFactor.id)).where(impacts).scalar_subquery().label("imp_max_id"),
        )
        .where(
            Campaign.topology_id == topology_id,
            Campaign.state == "done",
            select(FitRecord.id).where(*fits).exists(),
        )
        .order_by(Campaign.finished_at.desc(), Campaign.id.desc())
        .limit(1)
    )


def _campaign_ref(row) -> CampaignRef | None:
    if row is None or row.campaign_id is None:
        return None
    return CampaignRef(
        id=row.campaign_id,
        finished_at=row.finished_at,
        updated_at=row.updated_at,
        probes_done=row.probes_done,
        model_kind=row.model_kind,
        fits_count=row.fits_count or 0,
        fits_max_id=row.fits_max_id,
        impacts_count=row.imp_count or 0,
        impacts_max_id=row.imp_max_id,
    )


class _Statements:
    """Statements built once (with a bound parameter): building and cache-keying a statement of
    this size costs more CPU than running it."""

    _latest = None
    _answer = None

    @classmethod
    def latest(cls):
        if cls._latest is None:
            cls._latest = _latest_calibrated_query(bindparam("topology_id"))
        return cls._latest

    @classmethod
    def answer(cls):
        if cls._answer is None:
            cls._answer = _answer_query(bindparam("topology_id"))
        return cls._answer


def latest_calibrated(session: Session, topology_id: int) -> CampaignRef | None:
    row = session.execute(_Statements.latest(), {"topology_id": topology_id}).one_or_none()
    return _campaign_ref(row)


def _answer_query(topology_id):
    """One row per subflow, each with its two ISPs and the latest calibrated campaign's columns
    (the same on every row)."""
    latest = _latest_calibrated_query(topology_id).subquery()
    li, ri, ls, rs = aliased(ISP), aliased(ISP), aliased(Site), aliased(Site)
    return (
        select(
            ls.name.label("local_site"),
            rs.name.label("remote_site"),
            li.id.label("li_id"),
            li.position.label("li_pos"),
            li.name.label("li_name"),
            li.label.label("li_label"),
            li.down_kbps.label("li_down"),
            li.up_kbps.label("li_up"),
            ri.id.label("ri_id"),
            ri.position.label("ri_pos"),
            ri.name.label("ri_name"),
            ri.label.label("ri_label"),
            ri.down_kbps.label("ri_down"),
            ri.up_kbps.label("ri_up"),
            Subflow.name.label("sf_name"),
            Subflow.bandwidth_kbps.label("sf_bw"),
            Subflow.rtt_ms.label("sf_rtt"),
            *latest.c,
        )
        .select_from(Subflow)
        .join(Topology, Topology.id == Subflow.topology_id)
        .join(ls, ls.id == Topology.local_site_id)
        .join(rs, rs.id == Topology.remote_site_id)
        .join(li, li.id == Subflow.local_isp_id)
        .join(ri, ri.id == Subflow.remote_isp_id)
        .outerjoin(latest, literal(True))
        .where(Subflow.topology_id == topology_id)
        .order_by(Subflow.position, Subflow.id)
    )


def load_for_answer(
    session: Session, topology_id: int
) -> tuple[TopologySnapshot, CampaignRef | None]:
    """The topology (sites, ISPs, subflows) and its latest calibrated campaign: one round trip."""
    rows = session.execute(_Statements.answer(), {"topology_id": topology_id}).all()
    if not rows:  # unknown (404), or a topology without subflows: the ORM path says which
        row = get_topology(session, topology_id)
        return snapshot_of(row), latest_calibrated(session, topology_id)
    local: dict[int, tuple] = {}
    remote: dict[int, tuple] = {}
    for r in rows:
        local[r.li_id] = (r.li_pos, r.li_id, (r.li_name, r.li_label, r.li_down, r.li_up))
        remote[r.ri_id] = (r.ri_pos, r.ri_id, (r.ri_name, r.ri_label, r.ri_down, r.ri_up))
    first = rows[0]
    snap = _snapshot(
        topology_id,
        (first.local_site, tuple(v[2] for v in sorted(local.values()))),
        (first.remote_site, tuple(v[2] for v in sorted(remote.values()))),
        tuple((r.sf_name, r.sf_bw, r.sf_rtt) for r in rows),
    )
    return snap, _campaign_ref(first)


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
    topology: TopologySnapshot,
    used: list[str],
    summary: CampaignSummary | None,
    obs_mib: float | None,
) -> dict:
    """Eq. 1 over the used subflows, or why it is unknown. Measured RTT/RTO win over configured."""
    rtts, rtos, bws, sources, missing = [], [], [], set(), []
    for name in used:
        bandwidth_kbps, configured_rtt_ms = topology.subflows[name]
        measured = summary.rtt_ms.get(name) if summary else None
        if measured is not None:
            rtt_ms, source = measured, "measurements"
        elif configured_rtt_ms is not None:
            rtt_ms, source = configured_rtt_ms, "topology"
        else:
            missing.append(name)
            continue
        rto_measured = summary.rto_ms.get(name) if summary else None
        rtts.append(rtt_ms / 1000.0)
        rtos.append(rto_measured / 1000.0 if rto_measured else rto_from_rtt(rtt_ms / 1000.0))
        bws.append(bandwidth_kbps)
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


def _inputs(topology: TopologySnapshot, delta: float, bs_min: float, bs_max: float) -> dict:
    return {
        "topology_id": topology.id,
        "topology": topology.spec_json,
        "rtts_ms": dict(topology.rtts_ms),
        "delta": delta,
        "bs_min_mib": bs_min,
        "bs_max_mib": bs_max,
    }


_INSERT = insert(Recommendation.__table__)


def _store(session: Session, **values: Any) -> Recommendation:
    """One INSERT (the new id comes back with it) and the row as a persistent ORM object.

    Cheaper than the unit of work for a single new row; later changes to the object (the campaign
    runner adds flags and notes) are flushed as an UPDATE as usual.
    """
    result = session.connection().execute(_INSERT, values)
    rec = Recommendation(id=result.inserted_primary_key[0], **values)
    make_transient_to_detached(rec)
    session.add(rec)
    return rec


def recommend(
    session: Session,
    *,
    topology_id: int | None = None,
    topology: algo.Topology | None = None,
    rtts_ms: Mapping[str, float] | None = None,
    delta: float = DEFAULT_DELTA,
    bs_min_mib: float | None = None,
    bs_max_mib: float | None = None,
    settings: Settings | None = None,
) -> Outcome:
    """Answer for a stored topology (by id) or an inline one (stored on the way); always stored.

    Buffer bounds left out: a calibrated answer is solved on the buffers its campaign measured
    (a fitted quadratic is not extrapolated), a provisional one reports the paper's 0.5..30 MiB.
    Bounds given for a calibrated answer are narrowed to the measured range, and flagged.
    """
    settings = settings or get_settings()
    try:
        # A missing bound stands aside (the other is checked alone; the pair when both are given).
        check_bounds(delta, _UNSET_MIN if bs_min_mib is None else bs_min_mib,
                     _UNSET_MAX if bs_max_mib is None else bs_max_mib)
    except ValueError as exc:
        field_name = str(exc).split(":", 1)[0]
        raise Invalid(str(exc), ("body", field_name)) from exc
    if (topology_id is None) == (topology is None):
        raise Invalid("give exactly one of topology_id and topology", ("body", "topology_id"))
    if topology is not None:
        snap = snapshot_of(ensure_topology(session, topology, rtts_ms))
        campaign = latest_calibrated(session, snap.id)
    else:
        snap, campaign = load_for_answer(session, topology_id)
        if rtts_ms:
            raise Invalid(
                "rtts_ms goes with an inline topology; use PATCH /topologies/{id}",
                ("body", "rtts_ms"),
            )
    flags: list[str] = []
    if campaign is not None:
        outcome = _calibrated(session, snap, campaign, delta, bs_min_mib, bs_max_mib, flags)
        if outcome is not None:
            return outcome
    return _provisional(
        session, snap, delta,
        DEFAULT_BS_MIN_MIB if bs_min_mib is None else bs_min_mib,
        DEFAULT_BS_MAX_MIB if bs_max_mib is None else bs_max_mib,
        flags, settings,
    )


@dataclass(frozen=True)
class _Answer:
    """A calibrated answer without what depends on the clock (data age, stale flag) or the row.

    Cached per (campaign and its results' versions, delta, bounds, topology content): a finished
    campaign's fits, impact factors and measurements do not change. Shared: never mutated.
    """

    error: str | None = None
    opm: str | None = None
    occ: str | None = None
    obs_mib: float | None = None
    otp_mbps: float | None = None
    tp_max_mbps: float | None = None
    outputs: dict = field(default_factory=dict)
    traditional: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)  # "data_age_s" filled in per request
    flags_before_stale: tuple[str, ...] = ()
    flags_after_stale: tuple[str, ...] = ()
    newest_at: datetime | None = None
    bs_min_mib: float | None = None  # the bounds it was solved on (the measured range)
    bs_max_mib: float | None = None


_answers = _LRU(1024)


def clear_caches() -> None:
    """Forget every cached snapshot, answer and campaign summary (tests, or after manual edits)."""
    _answers.clear()
    _snapshots.clear()
    with _summary_lock:
        _summary_cache.clear()


def _calibrated(
    session: Session,
    topology: TopologySnapshot,
    ref: CampaignRef,
    delta: float,
    bs_min: float | None,
    bs_max: float | None,
    flags: list[str],
) -> Outcome | None:
    key = (
        str(session.get_bind().engine.url),
        ref.id,
        ref.finished_at,
        ref.updated_at,
        ref.probes_done,
        ref.model_kind,
        ref.fits_count,
        ref.fits_max_id,
        ref.impacts_count,
        ref.impacts_max_id,
        delta,
        bs_min,
        bs_max,
        topology.key,
    )
    answer = _answers.get(key)
    campaign = None
    if answer is None:
        campaign = session.get(Campaign, ref.id)
        answer = _solve_calibrated(session, topology, campaign, delta, bs_min, bs_max)
        _answers.put(key, answer)
    if answer.error is not None:
        flags.append(answer.error)
        return None
    now = utcnow()
    newest = answer.newest_at
    age = (now - newest).total_seconds() if newest else None
    flags.extend(answer.flags_before_stale)
    if age is not None and age > STALE_AFTER_S:
        flags.append("stale_data")
    flags.extend(answer.flags_after_stale)
    provenance = dict(answer.provenance)
    provenance["data_age_s"] = age
    bs_min, bs_max = answer.bs_min_mib, answer.bs_max_mib
    rec = _store(
        session,
        topology_id=topology.id,
        campaign_id=ref.id,
        kind="calibrated",
        delta=delta,
        bs_min_mib=bs_min,
        bs_max_mib=bs_max,
        inputs=_inputs(topology, delta, bs_min, bs_max),
        opm=answer.opm,
        occ=answer.occ,
        obs_mib=answer.obs_mib,
        otp_mbps=answer.otp_mbps,
        tp_max_mbps=answer.tp_max_mbps,
        outputs=dict(answer.outputs),
        traditional=dict(answer.traditional),
        provenance=provenance,
        quality_flags=flags,
        created_at=now,
    )
    return Outcome(recommendation=rec, campaign_id=ref.id, _campaign=campaign, _session=session)


def _solve_calibrated(
    session: Session,
    topology: TopologySnapshot,
    campaign: Campaign,
    delta: float,
    bs_min: float | None,
    bs_max: float | None,
) -> _Answer:
    fits: list[FitRecord] = list_fits(session, campaign.id, campaign.model_kind)
    curves = [c for rec in fits for c in fit_curves(rec)]
    flags: list[str] = []
    measured_lo, measured_hi = buffer_range(campaign)
    lo = measured_lo if bs_min is None else max(bs_min, measured_lo)
    hi = measured_hi if bs_max is None else min(bs_max, measured_hi)
    if (lo, hi) != (bs_min, bs_max) and (bs_min, bs_max) != (None, None):
        flags.append(f"buffer_range_limited_to_measured:{measured_lo:g}-{measured_hi:g}")
    try:
        solution = solve(curves, delta, lo, hi)
    except ValueError as exc:
        return _Answer(error=f"calibration_unusable: campaign {campaign.id}: {exc}")
    names = topology.spec.subflow_names()
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
    newest = summary.newest_at or campaign.finished_at
    after_stale: list[str] = []
    warnings = []
    for rec in fits:
        if not rec.gate_passed:
            after_stale.append(f"quality_gate_failed:{rec.pm}")
        warnings.extend(f"{rec.pm}: {w}" for w in rec.warnings)
    # What the campaign could not measure (failed probes, dropped CCs, ...) goes with every answer.
    after_stale.extend(campaign_flags(campaign.notes or {}))
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
        "data_age_s": None,
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
    return _Answer(
        opm=solution.opm,
        occ=solution.occ,
        obs_mib=solution.obs_mib,
        otp_mbps=solution.otp_mbps,
        tp_max_mbps=solution.tp_max_mbps,
        outputs=outputs,
        traditional=traditional,
        provenance=provenance,
        flags_before_stale=tuple(flags),
        flags_after_stale=tuple(after_stale),
        newest_at=newest,
        bs_min_mib=lo,
        bs_max_mib=hi,
    )


def _provisional(
    session: Session,
    topology: TopologySnapshot,
    delta: float,
    bs_min: float,
    bs_max: float,
    flags: list[str],
    settings: Settings,
) -> Outcome:
    spec = topology.spec
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
    return Outcome(
        recommendation=rec, campaign_id=campaign.id, campaign_created=created, _campaign=campaign
    )


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
