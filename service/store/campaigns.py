"""Campaign rows: create, read and list them. One concern a module beside it: a campaign's life
and run state (`store.campaign_states`), what it reports and flags (`store.campaign_report`),
the fleet policy's rows (`store.campaign_fleet`), the probe lease (`store.probe_lease`), the
dispatch outbox (`store.dispatch_outbox`). Their functions are named here too, so a caller keeps
one `campaigns` import for a campaign row.

Plain data access: every function takes the session and keyword arguments, flushes but never
commits. Choosing a campaign's plan and deciding what it does next belongs to `service.flows`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from models import ACTIVE_CAMPAIGN_STATES, Campaign, Site, Topology, utcnow

from ..errors import NotFound
from ..state import CampaignState
from .campaign_fleet import fleet_rows, mark_site_wait
from .campaign_report import buffer_range, flags, report
from .campaign_states import is_final, save_state, set_state, update_state

__all__ = [
    "active_campaign",
    "active_campaign_ids",
    "active_ids_skip_locked",
    "add_campaign",
    "buffer_range",
    "flags",
    "fleet_rows",
    "get_campaign",
    "is_final",
    "list_campaigns",
    "mark_site_wait",
    "report",
    "save_state",
    "set_state",
    "site_names",
    "update_state",
]

def add_campaign(
    session: Session,
    *,
    topology_id: int,
    ccs: Sequence[str],
    pms: Sequence[str],
    buffer_grid_mib: Sequence[float],
    runs: int,
    duration_s: float,
    delta: float,
    model_kind: str,
    probe_seconds_budget: float | None,
    probes_total: int,
    reason: str,
    seed: int = 0,
    mode: str = "grid",
    objective: Mapping[str, Any] | None = None,
    objective_key: str = "bulk",
    probe_tool: str = "auto",
) -> Campaign:
    """A new campaign in state 'queued' (validated and planned by `flows.campaign.plan`)."""
    now = utcnow()
    campaign = Campaign(
        topology_id=topology_id,
        state="queued",
        reason=reason,
        ccs=list(ccs),
        pms=list(pms),
        buffer_grid_mib=list(buffer_grid_mib),
        runs=runs,
        duration_s=duration_s,
        delta=delta,
        model_kind=model_kind,
        mode=mode,
        objective=dict(objective) if objective else None,
        objective_key=objective_key,
        probe_tool=probe_tool,
        seed=seed,
        dropped_ccs={},
        run_state_json=CampaignState().with_budget(
            cap_s=probe_seconds_budget, planned=probes_total
        ).to_dict(),
        created_at=now,
        queued_at=now,
    )
    session.add(campaign)
    session.flush()
    return campaign


def get_campaign(session: Session, *, campaign_id: int) -> Campaign:
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise NotFound(f"campaign {campaign_id} not found")
    return campaign


def list_campaigns(
    session: Session,
    *,
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


def active_campaign(session: Session, *, topology_id: int) -> Campaign | None:
    """The oldest queued or running campaign of the topology, if any."""
    return session.scalar(
        select(Campaign)
        .where(Campaign.topology_id == topology_id, Campaign.state.in_(ACTIVE_CAMPAIGN_STATES))
        .order_by(Campaign.id)
        .limit(1)
    )


def active_campaign_ids(session: Session) -> list[int]:
    return list(
        session.scalars(
            select(Campaign.id)
            .where(Campaign.state.in_(ACTIVE_CAMPAIGN_STATES))
            .order_by(Campaign.id)
        )
    )


def site_names(session: Session, *, campaign_id: int) -> tuple[str, str]:
    """(sender site, receiver site): the names of the campaign's topology's two sites."""
    local, remote = aliased(Site), aliased(Site)
    row = session.execute(
        select(local.name, remote.name)
        .select_from(Campaign)
        .join(Topology, Topology.id == Campaign.topology_id)
        .join(local, local.id == Topology.local_site_id)
        .join(remote, remote.id == Topology.remote_site_id)
        .where(Campaign.id == campaign_id)
    ).one_or_none()
    if row is None:
        raise NotFound(f"campaign {campaign_id} not found")
    return row[0], row[1]


def active_ids_skip_locked(session: Session, *conditions) -> list[int]:
    """Ids of active campaigns meeting `conditions`, locked for this transaction; rows another
    transaction holds are skipped (SKIP LOCKED), not waited for (the sweepers of
    `store.probe_lease` and `store.dispatch_outbox`)."""
    return list(
        session.scalars(
            select(Campaign.id)
            .where(Campaign.state.in_(ACTIVE_CAMPAIGN_STATES), *conditions)
            .order_by(Campaign.id)
            .with_for_update(skip_locked=True)
        )
    )
