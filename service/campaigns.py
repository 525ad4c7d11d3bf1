"""Campaigns and everything they produce: measurements, impact factors (Omega, SP*) and fits.

These are the functions the workers call (issue 5): create a campaign, move it through its states,
record each probe run idempotently, then derive and store impact factors and fits from what was
recorded. Nothing here talks to a probe or a queue.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from models import (
    CAMPAIGN_STATES,
    NO_EXCLUSION,
    Campaign,
    FitRecord,
    ImpactFactor,
    Measurement,
    Topology,
    utcnow,
)

from .algorithm.curve import PATH_MANAGERS, PCDC, Curve, normalize_cc, normalize_pm
from .algorithm.impact import ImpactResult, impact_from_omegas, impact_from_series
from .algorithm.regression import MODEL_KINDS, Fit, Sample, fit
from .algorithm.solver import DEFAULT_DELTA
from .errors import Conflict, Invalid, NotFound
from .inventory import get_topology
from .settings import Settings, get_settings

# The paper's grid: 0.5 .. 30 MiB in 0.5 MiB steps (60 points).
DEFAULT_BUFFER_GRID_MIB = [0.5 * k for k in range(1, 61)]
ACTIVE_STATES = ("queued", "running")
FINAL_STATES = ("done", "failed", "cancelled")
_TRANSITIONS = {
    "queued": {"running", "cancelled", "failed"},
    "running": {"done", "failed", "cancelled"},
    "done": set(),
    "failed": {"queued"},  # a retry
    "cancelled": {"queued"},
}


def planned_probes(n_subflows: int, ccs: int, pms: int, grid: int, runs: int) -> int:
    """Impact phase: per CC and run, one all-subflow run plus one per excluded subflow;
    buffer phase: every (PM, CC, bs, run)."""
    return ccs * runs * (1 + n_subflows) + pms * ccs * grid * runs


def create_campaign(
    session: Session,
    topology_id: int,
    *,
    ccs: Sequence[str] | None = None,
    pms: Sequence[str] | None = None,
    buffer_grid_mib: Sequence[float] | None = None,
    runs: int | None = None,
    duration_s: float | None = None,
    delta: float = DEFAULT_DELTA,
    model_kind: str = "paper",
    probe_seconds_budget: float | None = None,
    reason: str = "manual",
    settings: Settings | None = None,
) -> Campaign:
    """A new campaign in state 'queued' (not dispatched: see service.dispatch)."""
    settings = settings or get_settings()
    topology = get_topology(session, topology_id)
    try:
        ccs = [normalize_cc(c) for c in (ccs or settings.campaign_ccs)]
    except ValueError as exc:
        raise Invalid(str(exc), ("body", "ccs")) from exc
    try:
        pms = [normalize_pm(p) for p in (pms or PATH_MANAGERS)]
    except ValueError as exc:
        raise Invalid(str(exc), ("body", "pms")) from exc
    grid = sorted({
        float(b)
        for b in (buffer_grid_mib or settings.campaign_buffer_grid_mib or DEFAULT_BUFFER_GRID_MIB)
    })
    if len(grid) < 3 or any(not math.isfinite(b) or b <= 0 for b in grid):
        raise Invalid(
            "needs at least 3 distinct positive buffer sizes", ("body", "buffer_grid_mib")
        )
    if model_kind not in MODEL_KINDS:
        raise Invalid(f"must be one of {MODEL_KINDS}", ("body", "model_kind"))
    if not 0 <= delta < 1:
        raise Invalid("must be in [0, 1)", ("body", "delta"))
    runs = runs or settings.campaign_runs
    duration_s = duration_s or settings.campaign_duration_s
    total = planned_probes(len(topology.subflows), len(set(ccs)), len(set(pms)), len(grid), runs)
    now = utcnow()
    campaign = Campaign(
        topology_id=topology.id,
        state="queued",
        reason=reason,
        ccs=list(dict.fromkeys(ccs)),
        pms=list(dict.fromkeys(pms)),
        buffer_grid_mib=grid,
        runs=runs,
        duration_s=duration_s,
        delta=delta,
        model_kind=model_kind,
        probe_seconds_budget=(
            probe_seconds_budget
            if probe_seconds_budget is not None
            else settings.campaign_probe_seconds_budget
        ),
        probes_total=total,
        probes_done=0,
        probe_seconds_used=0.0,
        created_at=now,
        queued_at=now,
    )
    session.add(campaign)
    session.flush()
    return campaign


def buffer_range(campaign: Campaign) -> tuple[float, float]:
    """The buffers a campaign measured: its curves are solved and drawn on this range only
    (a fitted quadratic is not extrapolated)."""
    grid = campaign.buffer_grid_mib
    return min(grid), max(grid)


def campaign_flags(notes: dict) -> list[str]:
    """What a recommendation from this campaign must say is missing from its data."""
    flags = []
    if notes.get("failed_probes"):
        flags.append(f"missing_measurements:{len(notes['failed_probes'])}")
    if notes.get("dropped_ccs"):
        flags.append("dropped_ccs:" + ",".join(sorted(notes["dropped_ccs"])))
    if notes.get("unfitted_arms"):
        flags.append("unfitted_arms:" + ",".join(notes["unfitted_arms"]))
    if notes.get("budget_exhausted"):
        flags.append("budget_exhausted")
    return flags


def get_campaign(session: Session, campaign_id: int) -> Campaign:
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise NotFound(f"campaign {campaign_id} not found")
    return campaign


def list_campaigns(
    session: Session,
    topology_id: int | None = None,
    state: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Campaign], int]:
    query = select(Campaign)
    if topology_id is not None:
        query = query.where(Campaign.topology_id == topology_id)
    if state is not None:
        query = query.where(Campaign.state == state)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Campaign.id.desc()).limit(limit).offset(offset))
    return list(rows), total


def active_campaign(session: Session, topology_id: int) -> Campaign | None:
    """The oldest queued or running campaign of the topology, if any."""
    return session.scalar(
        select(Campaign)
        .where(Campaign.topology_id == topology_id, Campaign.state.in_(ACTIVE_STATES))
        .order_by(Campaign.id)
        .limit(1)
    )


def set_state(session: Session, campaign_id: int, state: str, error: str | None = None) -> Campaign:
    """Move a campaign to `state` (queued -> running -> done/failed, or cancelled)."""
    if state not in CAMPAIGN_STATES:
        raise Invalid(f"must be one of {CAMPAIGN_STATES}", ("body", "state"))
    campaign = get_campaign(session, campaign_id)
    if state == campaign.state:
        return campaign
    if state not in _TRANSITIONS[campaign.state]:
        raise Conflict(f"campaign {campaign.id} is {campaign.state}; it cannot become {state}")
    now = utcnow()
    campaign.state = state
    if state == "queued":
        campaign.queued_at, campaign.finished_at, campaign.error = now, None, None
    elif state == "running":
        campaign.started_at = campaign.started_at or now
    else:
        campaign.finished_at = now
    if error is not None:
        campaign.error = error
    session.flush()
    return campaign


def cancel_campaign(session: Session, campaign_id: int) -> Campaign:
    return set_state(session, campaign_id, "cancelled")


# --- measurements --------------------------------------------------------------------------------
def record_measurement(
    session: Session,
    campaign_id: int,
    *,
    phase: str,
    pm: str,
    cc: str,
    bs_mib: float,
    run: int,
    subflows: Sequence[str],
    duration_s: float,
    goodput_mbps: Sequence[float],
    tool: str,
    started_at: datetime,
    finished_at: datetime,
    excluded_subflow: str | None = None,
    interval_s: float = 1.0,
    subflow_bytes: Mapping[str, int] | None = None,
    rtt_ms: Mapping[str, float] | None = None,
    rto_ms: Mapping[str, float] | None = None,
    tool_version: str = "",
    raw_output: str = "",
    status: str = "ok",
    error: str | None = None,
) -> tuple[Measurement, bool]:
    """Store one probe run; (row, created). A second call with the same key returns the first row
    unchanged (created False), so a re-executed task neither duplicates data nor double-counts
    progress."""
    campaign = get_campaign(session, campaign_id)
    pm, cc = normalize_pm(pm), normalize_cc(cc)
    excluded = excluded_subflow or NO_EXCLUSION
    existing = session.scalar(
        select(Measurement).where(
            Measurement.campaign_id == campaign.id,
            Measurement.phase == phase,
            Measurement.pm == pm,
            Measurement.cc == cc,
            Measurement.bs_mib == float(bs_mib),
            Measurement.run == run,
            Measurement.excluded_subflow == excluded,
        )
    )
    if existing is not None:
        return existing, False
    series = [float(v) for v in goodput_mbps]
    row = Measurement(
        campaign_id=campaign.id,
        phase=phase,
        pm=pm,
        cc=cc,
        bs_mib=float(bs_mib),
        run=run,
        excluded_subflow=excluded,
        subflows=list(subflows),
        duration_s=float(duration_s),
        interval_s=float(interval_s),
        goodput_mbps=series,
        mean_goodput_mbps=(sum(series) / len(series)) if series else None,
        subflow_bytes=dict(subflow_bytes or {}),
        rtt_ms=dict(rtt_ms or {}),
        rto_ms=dict(rto_ms or {}),
        tool=tool,
        tool_version=tool_version,
        raw_output=raw_output,
        status=status,
        error=error,
        started_at=started_at,
        finished_at=finished_at,
    )
    session.add(row)
    campaign.probes_done += 1
    campaign.probe_seconds_used += float(duration_s)
    session.flush()
    return row, True


def get_measurement(session: Session, measurement_id: int) -> Measurement:
    row = session.get(Measurement, measurement_id)
    if row is None:
        raise NotFound(f"measurement {measurement_id} not found")
    return row


def list_measurements(
    session: Session,
    *,
    campaign_id: int | None = None,
    topology_id: int | None = None,
    phase: str | None = None,
    pm: str | None = None,
    cc: str | None = None,
    status: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Measurement], int]:
    query = select(Measurement)
    if campaign_id is not None:
        query = query.where(Measurement.campaign_id == campaign_id)
    if topology_id is not None:
        query = query.join(Campaign, Campaign.id == Measurement.campaign_id).where(
            Campaign.topology_id == topology_id
        )
    for column, value in (
        (Measurement.phase, phase),
        (Measurement.pm, pm),
        (Measurement.cc, cc),
        (Measurement.status, status),
    ):
        if value is not None:
            query = query.where(column == value)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Measurement.id).limit(limit).offset(offset))
    return list(rows), total


def _ok_measurements(session: Session, campaign_id: int, phase: str) -> list[Measurement]:
    return list(
        session.scalars(
            select(Measurement)
            .where(
                Measurement.campaign_id == campaign_id,
                Measurement.phase == phase,
                Measurement.status == "ok",
            )
            .order_by(Measurement.id)
        )
    )


# --- impact factors (Table 2 / 3) ---------------------------------------------------------------
def store_impact(
    session: Session, campaign_id: int, results: Iterable[ImpactResult]
) -> list[ImpactFactor]:
    """Replace the campaign's Omegas for each CC in `results`."""
    campaign = get_campaign(session, campaign_id)
    rows: list[ImpactFactor] = []
    for result in results:
        cc = normalize_cc(result.cc)
        session.execute(
            delete(ImpactFactor).where(
                ImpactFactor.campaign_id == campaign.id, ImpactFactor.cc == cc
            )
        )
        for k, (subflow, omega) in enumerate(result.omegas.items()):
            rows.append(
                ImpactFactor(
                    campaign_id=campaign.id,
                    cc=cc,
                    subflow=subflow,
                    position=k,
                    omega=float(omega),
                    in_subset=subflow in result.subset,
                )
            )
    session.add_all(rows)
    session.flush()
    return rows


def impact_from_measurements(session: Session, campaign_id: int) -> list[ImpactResult]:
    """Omegas from the impact-phase runs: per CC, the pooled TP_0 series (nothing excluded) against
    each subflow's pooled TP_i series (that subflow excluded), over all runs."""
    rows = _ok_measurements(session, campaign_id, "impact")
    by_cc: dict[str, dict[str, list[float]]] = {}
    for m in rows:
        by_cc.setdefault(m.cc, {}).setdefault(m.excluded_subflow, []).extend(m.goodput_mbps)
    results = []
    for cc, series in by_cc.items():
        tp0 = series.pop(NO_EXCLUSION, None)
        if not tp0 or not series:
            raise Invalid(f"campaign {campaign_id}: {cc} lacks the all-subflow or excluded runs")
        results.append(impact_from_series(cc, tp0, series))
    return results


def impact_results(session: Session, campaign_id: int) -> list[ImpactResult]:
    """The stored Omegas of a campaign as ImpactResults (Table 2 rows, Table 3 subsets)."""
    rows = session.scalars(
        select(ImpactFactor)
        .where(ImpactFactor.campaign_id == campaign_id)
        .order_by(ImpactFactor.id)
    )
    by_cc: dict[str, list[ImpactFactor]] = {}
    for row in rows:
        by_cc.setdefault(row.cc, []).append(row)
    results = []
    for cc, items in by_cc.items():
        items.sort(key=lambda r: r.position)
        result = impact_from_omegas(cc, {r.subflow: r.omega for r in items})
        results.append(result)
    return results


# --- fits (Table 4) -----------------------------------------------------------------------------
def store_fits(session: Session, campaign_id: int, fits: Iterable[Fit]) -> list[FitRecord]:
    """Replace the campaign's fit for each (PM, model kind) in `fits`."""
    campaign = get_campaign(session, campaign_id)
    rows = []
    for f in fits:
        session.execute(
            delete(FitRecord).where(
                FitRecord.campaign_id == campaign.id,
                FitRecord.pm == f.pm,
                FitRecord.model_kind == f.model,
            )
        )
        rows.append(
            FitRecord(
                campaign_id=campaign.id,
                pm=f.pm,
                model_kind=f.model,
                n=f.n,
                curves=[
                    {
                        "cc": c.cc,
                        "a": c.a,
                        "b": c.b,
                        "c": c.c,
                        "same_as_fullmesh": c.same_as_fullmesh,
                    }
                    for c in f.curves
                ],
                coefficients=[
                    {"name": c.name, "value": c.value, "p_value": c.p_value} for c in f.coefficients
                ],
                curve_p_values=_finite_json(f.curve_p_values),
                r2=f.r2,
                adj_r2=f.adj_r2 if math.isfinite(f.adj_r2) else None,
                buffer_p_value=f.buffer_p_value,
                gate_passed=f.gate_passed,
                warnings=list(f.warnings),
            )
        )
    session.add_all(rows)
    session.flush()
    return rows


def _finite_json(value):
    """JSON has no NaN/inf: those become null."""
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fit_from_measurements(session: Session, campaign_id: int) -> list[Fit]:
    """f5 over the buffer-phase runs (one sample per run: its mean goodput)."""
    campaign = get_campaign(session, campaign_id)
    samples = [
        Sample(pm=m.pm, cc=m.cc, bs_mib=m.bs_mib, tp_mbps=m.mean_goodput_mbps)
        for m in _ok_measurements(session, campaign.id, "buffer")
        if m.mean_goodput_mbps is not None
    ]
    if not samples:
        raise Invalid(f"campaign {campaign.id} has no buffer-phase measurements")
    same = [r.cc for r in impact_results(session, campaign.id) if r.same_as_fullmesh]
    return fit(samples, model=campaign.model_kind, same_as_fullmesh=same)


def fit_curves(rec: FitRecord) -> list[Curve]:
    return [
        Curve(
            pm=rec.pm,
            cc=c["cc"],
            a=c["a"],
            b=c["b"],
            c=c["c"],
            same_as_fullmesh=bool(c.get("same_as_fullmesh", False)) and rec.pm == PCDC,
        )
        for c in rec.curves
    ]


def list_fits(session: Session, campaign_id: int, model_kind: str | None = None) -> list[FitRecord]:
    query = select(FitRecord).where(FitRecord.campaign_id == campaign_id)
    if model_kind is not None:
        query = query.where(FitRecord.model_kind == model_kind)
    return list(session.scalars(query.order_by(FitRecord.id)))


def latest_calibrated_campaign(session: Session, topology_id: int) -> Campaign | None:
    """The newest finished campaign of the topology that has fits of its model kind."""
    has_fits = (
        select(FitRecord.id)
        .where(FitRecord.campaign_id == Campaign.id, FitRecord.model_kind == Campaign.model_kind)
        .exists()
    )
    return session.scalar(
        select(Campaign)
        .where(Campaign.topology_id == topology_id, Campaign.state == "done", has_fits)
        .order_by(Campaign.finished_at.desc(), Campaign.id.desc())
        .limit(1)
    )


def latest_campaign_with(session: Session, topology_id: int, what: type) -> Campaign | None:
    """The newest campaign of the topology that has rows in `what` (ImpactFactor or FitRecord)."""
    return session.scalar(
        select(Campaign)
        .where(
            Campaign.topology_id == topology_id,
            select(what.id).where(what.campaign_id == Campaign.id).exists(),
        )
        .order_by(Campaign.id.desc())
        .limit(1)
    )


def campaign_topology(session: Session, campaign: Campaign) -> Topology:
    return get_topology(session, campaign.topology_id)
