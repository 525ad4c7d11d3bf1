"""What campaigns derive from their measurements: impact factors (Tables 2 and 3) and fits
(Table 4). Stored per campaign; a new derivation replaces the old one.

The table reads pick the newest campaign that has the table's data unless `campaign_id` names
another campaign of the same topology.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from models import Campaign, FitRecord, ImpactFactor
from probes.vocabulary import PCDC

from ..algorithm.impact import ImpactResult, impact_from_omegas
from ..algorithm.impact_confidence import ConfidentImpact
from ..algorithm.regression import Fit
from ..algorithm.saturating_curve import AnyCurve
from ..errors import NotFound
from ..formats import curve_from_dict, curve_to_dict
from .campaigns import get_campaign
from .inventory import get_topology


# --- impact factors (Table 2 / 3) ---------------------------------------------------------------
def store_impact(
    session: Session, *, campaign_id: int, results: Iterable[ImpactResult | ConfidentImpact]
) -> list[ImpactFactor]:
    """Replace the campaign's Omegas for each CC in `results` (with their confidence intervals
    when the result has estimates over several runs)."""
    campaign = get_campaign(session, campaign_id=campaign_id)
    rows: list[ImpactFactor] = []
    for result in results:
        session.execute(
            delete(ImpactFactor).where(
                ImpactFactor.campaign_id == campaign.id, ImpactFactor.cc == result.cc
            )
        )
        estimates = getattr(result, "estimates", {})
        for k, (subflow, omega) in enumerate(result.omegas.items()):
            e = estimates.get(subflow)
            rows.append(
                ImpactFactor(
                    campaign_id=campaign.id,
                    cc=result.cc,
                    subflow=subflow,
                    position=k,
                    omega=float(omega),
                    in_subset=subflow in result.subset,
                    omega_low=e.ci_low if e else None,
                    omega_high=e.ci_high if e else None,
                    settled=e.settled if e else None,
                    runs=e.runs if e else None,
                )
            )
    session.add_all(rows)
    session.flush()
    return rows


def impact_results(session: Session, *, campaign_id: int) -> list[ImpactResult]:
    """The stored Omegas of a campaign as ImpactResults (Table 2 rows, Table 3 subsets), SP* = SP
    judged against the topology's subflows."""
    campaign = get_campaign(session, campaign_id=campaign_id)
    topology = get_topology(session, topology_id=campaign.topology_id)
    subflows = [sf.name for sf in topology.subflows]
    rows = session.scalars(
        select(ImpactFactor)
        .where(ImpactFactor.campaign_id == campaign_id)
        .order_by(ImpactFactor.id)  # CCs and subflows in the order they were stored
    )
    by_cc: dict[str, dict[str, float]] = {}
    for row in rows:
        by_cc.setdefault(row.cc, {})[row.subflow] = row.omega
    return [impact_from_omegas(cc, omegas, subflows) for cc, omegas in by_cc.items()]


def omega_intervals(session: Session, *, campaign_id: int) -> dict[str, dict[str, dict]]:
    """cc -> subflow -> {low, high, settled, runs}: how sure each stored Omega is."""
    rows = session.scalars(select(ImpactFactor).where(ImpactFactor.campaign_id == campaign_id))
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r.cc, {})[r.subflow] = {
            "low": r.omega_low, "high": r.omega_high, "settled": r.settled, "runs": r.runs,
        }
    return out


def omegas_of(session: Session, *, campaign_id: int) -> dict[tuple[str, str], float]:
    """(cc, subflow) -> Omega of one campaign."""
    rows = session.scalars(select(ImpactFactor).where(ImpactFactor.campaign_id == campaign_id))
    return {(r.cc, r.subflow): r.omega for r in rows}


# --- fits (Table 4) -----------------------------------------------------------------------------
def store_fits(session: Session, *, campaign_id: int, fits: Iterable[Fit]) -> list[FitRecord]:
    """Replace the campaign's fit for each (PM, model kind) in `fits`."""
    campaign = get_campaign(session, campaign_id=campaign_id)
    rows = []
    for f in fits:
        session.execute(
            delete(FitRecord).where(
                FitRecord.campaign_id == campaign.id,
                FitRecord.pm == f.pm,
                FitRecord.model_kind == f.model,
            )
        )
        rows.append(_fit_row(campaign.id, f))
    session.add_all(rows)
    session.flush()
    return rows


def _fit_row(campaign_id: int, f: Fit) -> FitRecord:
    return FitRecord(
        campaign_id=campaign_id,
        pm=f.pm,
        model_kind=f.model,
        n=f.n,
        curves=[curve_to_dict(c) for c in f.curves],  # any kind: {"kind", "pm", "cc", ...}
        arms=finite_json([asdict(a) for a in f.arms]),
        coefficients=[
            {"name": c.name, "value": c.value, "p_value": c.p_value} for c in f.coefficients
        ],
        curve_p_values=finite_json(f.curve_p_values),
        r2=f.r2,
        adj_r2=f.adj_r2 if math.isfinite(f.adj_r2) else None,
        buffer_p_value=f.buffer_p_value,
        gate_passed=f.gate_passed,
        warnings=list(f.warnings),
    )


def finite_json(value: Any) -> Any:
    """JSON has no NaN/inf: those become null."""
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fit_curves(rec: FitRecord) -> list[AnyCurve]:
    """The stored curves back as the solver's objects (rows from before curve kinds lack "pm"
    and "kind": they are the paper's quadratics of the row's PM)."""
    return [
        curve_from_dict(
            {
                **c,
                "pm": rec.pm,
                "same_as_fullmesh": bool(c.get("same_as_fullmesh", False)) and rec.pm == PCDC,
            }
        )
        for c in rec.curves
    ]


def list_fits(
    session: Session, *, campaign_id: int, model_kind: str | None = None
) -> list[FitRecord]:
    query = select(FitRecord).where(FitRecord.campaign_id == campaign_id)
    if model_kind is not None:
        query = query.where(FitRecord.model_kind == model_kind)
    return list(session.scalars(query.order_by(FitRecord.id)))


# --- which campaign a table shows ---------------------------------------------------------------
def latest_campaign_with(session: Session, *, topology_id: int, what: type) -> Campaign | None:
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


def campaigns_with(session: Session, *, topology_id: int, what: type) -> list[Campaign]:
    """Every campaign of the topology that has rows in `what`, oldest first."""
    has = select(what.id).where(what.campaign_id == Campaign.id).exists()
    return list(
        session.scalars(
            select(Campaign).where(Campaign.topology_id == topology_id, has).order_by(Campaign.id)
        )
    )


def table_campaign(
    session: Session, *, topology_id: int, campaign_id: int | None, what: type
) -> Campaign | None:
    """The asked-for campaign of this topology, or the newest one with rows in `what`."""
    get_topology(session, topology_id=topology_id)
    if campaign_id is None:
        return latest_campaign_with(session, topology_id=topology_id, what=what)
    campaign = get_campaign(session, campaign_id=campaign_id)
    if campaign.topology_id != topology_id:
        raise NotFound(f"campaign {campaign_id} is not a campaign of topology {topology_id}")
    return campaign


def impact_table(session: Session, *, topology_id: int, campaign_id: int | None = None) -> dict:
    """Table 2: {topology_id, campaign_id, subflows, rows: [{cc, omegas: {subflow: Omega}}]}."""
    topology = get_topology(session, topology_id=topology_id)
    campaign = table_campaign(
        session, topology_id=topology_id, campaign_id=campaign_id, what=ImpactFactor
    )
    results = impact_results(session, campaign_id=campaign.id) if campaign else []
    intervals = omega_intervals(session, campaign_id=campaign.id) if campaign else {}
    return {
        "topology_id": topology.id,
        "campaign_id": campaign.id if campaign else None,
        "subflows": [sf.name for sf in topology.subflows],
        "rows": [
            {"cc": r.cc, "omegas": r.omegas, "intervals": intervals.get(r.cc, {})}
            for r in results
        ],
    }


def subset_table(session: Session, *, topology_id: int, campaign_id: int | None = None) -> dict:
    """Table 3: per CC the PCDC subset SP*, the standby order, and whether SP* = SP."""
    topology = get_topology(session, topology_id=topology_id)
    campaign = table_campaign(
        session, topology_id=topology_id, campaign_id=campaign_id, what=ImpactFactor
    )
    results = impact_results(session, campaign_id=campaign.id) if campaign else []
    return {
        "topology_id": topology.id,
        "campaign_id": campaign.id if campaign else None,
        "subflows": [sf.name for sf in topology.subflows],
        "rows": [
            {
                "cc": r.cc,
                "subset": r.subset,
                "standby": r.standby,
                "same_as_fullmesh": r.same_as_fullmesh,
            }
            for r in results
        ],
    }


def fit_table(
    session: Session,
    *,
    topology_id: int,
    campaign_id: int | None = None,
    model_kind: str | None = None,
) -> tuple[Campaign | None, list[FitRecord]]:
    """Table 4: the campaign's fits (of its own model kind unless another is asked for)."""
    campaign = table_campaign(
        session, topology_id=topology_id, campaign_id=campaign_id, what=FitRecord
    )
    if campaign is None:
        return None, []
    return campaign, list_fits(session, campaign_id=campaign.id, model_kind=model_kind)
