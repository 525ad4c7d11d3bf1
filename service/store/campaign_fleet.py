"""The fleet policy's rows: every active campaign with its two sites, whether a live probe lease
holds it and since when it waits for its sites (`flows.campaign.fleet`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, aliased

from models import ACTIVE_CAMPAIGN_STATES, Campaign, Site, Topology, utcnow


def fleet_rows(session: Session, *, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every active campaign, for the fleet policy: the row, its two site names, whether a live
    lease holds it, and when it last had to wait for its sites."""
    now = now or utcnow()
    local, remote = aliased(Site), aliased(Site)
    rows = session.execute(
        select(Campaign, local.name, remote.name)
        .join(Topology, Topology.id == Campaign.topology_id)
        .join(local, local.id == Topology.local_site_id)
        .join(remote, remote.id == Topology.remote_site_id)
        .where(Campaign.state.in_(ACTIVE_CAMPAIGN_STATES))
        .order_by(Campaign.id)
    ).all()
    return [
        {
            "campaign": c,
            "campaign_id": c.id,
            "sites": (a, b),
            "leased": c.lease_id is not None and c.lease_until is not None and c.lease_until > now,
            "site_wait_at": c.site_wait_at,
        }
        for c, a, b in rows
    ]


def mark_site_wait(session: Session, *, campaign_id: int, at: datetime | None) -> None:
    """Record that the campaign waits for its sites since `at` (None: it has them)."""
    session.execute(update(Campaign).where(Campaign.id == campaign_id).values(site_wait_at=at))
