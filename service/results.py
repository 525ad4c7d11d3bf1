"""The paper's tables for a topology: Table 2 (Omega), Table 3 (SP*), Table 4 (fits).

By default the newest campaign that has the table's data; `campaign_id` picks another one of the
same topology.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from models import Campaign, FitRecord, ImpactFactor

from .campaigns import get_campaign, impact_results, latest_campaign_with, list_fits
from .errors import NotFound
from .inventory import get_topology


def _campaign(session: Session, topology_id: int, campaign_id: int | None, what) -> Campaign | None:
    get_topology(session, topology_id)
    if campaign_id is None:
        return latest_campaign_with(session, topology_id, what)
    campaign = get_campaign(session, campaign_id)
    if campaign.topology_id != topology_id:
        raise NotFound(f"campaign {campaign_id} is not a campaign of topology {topology_id}")
    return campaign


def impact_table(session: Session, topology_id: int, campaign_id: int | None = None) -> dict:
    """Table 2: {topology_id, campaign_id, subflows, rows: [{cc, omegas: {subflow: Omega}}]}."""
    topology = get_topology(session, topology_id)
    campaign = _campaign(session, topology_id, campaign_id, ImpactFactor)
    results = impact_results(session, campaign.id) if campaign else []
    return {
        "topology_id": topology.id,
        "campaign_id": campaign.id if campaign else None,
        "subflows": [sf.name for sf in topology.subflows],
        "rows": [{"cc": r.cc, "omegas": r.omegas} for r in results],
    }


def subset_table(session: Session, topology_id: int, campaign_id: int | None = None) -> dict:
    """Table 3: per CC the PCDC subset SP*, the standby order, and whether SP* = SP."""
    topology = get_topology(session, topology_id)
    campaign = _campaign(session, topology_id, campaign_id, ImpactFactor)
    results = impact_results(session, campaign.id) if campaign else []
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
    topology_id: int,
    campaign_id: int | None = None,
    model_kind: str | None = None,
) -> tuple[Campaign | None, list[FitRecord]]:
    """Table 4: the campaign's fits (of its own model kind unless another is asked for)."""
    campaign = _campaign(session, topology_id, campaign_id, FitRecord)
    if campaign is None:
        return None, []
    return campaign, list_fits(session, campaign.id, model_kind)
