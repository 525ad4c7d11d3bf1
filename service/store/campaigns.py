"""Campaign rows: create, read, list and move through their states (the probe lease is
`store.probe_lease`, the dispatch outbox `store.dispatch_outbox`).

Plain data access: every function takes the session and keyword arguments, flushes but never
commits. Choosing a campaign's plan and deciding what it does next belongs to `service.flows`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, aliased

from models import (
    ACTIVE_CAMPAIGN_STATES,
    CAMPAIGN_STATES,
    FINAL_CAMPAIGN_STATES,
    Campaign,
    Site,
    Topology,
    utcnow,
)

from ..errors import Conflict, Invalid, NotFound

_TRANSITIONS = {
    "queued": {"running", "cancelled", "failed"},
    "running": {"done", "failed", "cancelled"},
    "done": set(),
    "failed": {"queued"},  # a retry
    "cancelled": {"queued"},
}


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
    """A new campaign in state 'queued' (validated and planned by `flows.plan`)."""
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
        probe_seconds_budget=probe_seconds_budget,
        probes_total=probes_total,
        seed=seed,
        extra_impact_runs={},
        probes_done=0,
        probe_seconds_used=0.0,
        dropped_ccs={},
        notes={},
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


def set_state(
    session: Session, *, campaign_id: int, state: str, error: str | None = None
) -> Campaign:
    """Move a campaign to `state` (queued -> running -> done/failed, or cancelled)."""
    if state not in CAMPAIGN_STATES:
        raise Invalid(f"must be one of {CAMPAIGN_STATES}", ("body", "state"))
    campaign = get_campaign(session, campaign_id=campaign_id)
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


def add_note(campaign: Campaign, key: str, value: Any) -> None:
    """One entry of what the campaign reports (failed probes, unfitted arms)."""
    campaign.notes = {**(campaign.notes or {}), key: value}  # a new dict: SQLAlchemy sees it


def report(campaign: Campaign) -> dict[str, Any]:
    """What a campaign decided and met on the way, as one JSON object (API, provenance)."""
    return {
        **(campaign.notes or {}),
        "ccs": campaign.active_ccs,
        "offered_ccs": campaign.offered_ccs,
        "dropped_ccs": dict(campaign.dropped_ccs or {}),
        "impact_runs": campaign.impact_runs,
        "extra_rounds": campaign.extra_rounds,
        "budget_exhausted": campaign.budget_exhausted,
        "recommendation_id": campaign.recommendation_id,
    }


def flags(campaign: Campaign) -> list[str]:
    """What a recommendation from this campaign must say is missing from its data."""
    notes = campaign.notes or {}
    out = []
    if notes.get("failed_probes"):
        out.append(f"missing_measurements:{len(notes['failed_probes'])}")
    if campaign.dropped_ccs:
        out.append("dropped_ccs:" + ",".join(sorted(campaign.dropped_ccs)))
    # An adaptive answer is read off measured means: arms it eliminated early have no fit, and
    # need none.
    if notes.get("unfitted_arms") and campaign.mode != "adaptive":
        out.append("unfitted_arms:" + ",".join(notes["unfitted_arms"]))
    if campaign.budget_exhausted:
        out.append("budget_exhausted")
    if notes.get("grid_extended"):
        out.append("grid_extended:" + ",".join(f"{b:g}" for b in notes["grid_extended"]))
    if notes.get("adaptive"):  # adaptive:settled / adaptive:budget
        out.append(f"adaptive:{notes['adaptive']['stop']}")
        # the rate inside a probe at OBS never settled: the promise is wide, and this is why
        if ((notes["adaptive"].get("spread_at_obs") or {}).get("unsteady_runs") or 0) > 0:
            out.append("unsteady_rate_at_obs")
    if (notes.get("warm") or {}).get("verdict"):  # warm_confirmed / warm_drifted
        out.append(notes["warm"]["verdict"])
    if notes.get("grid_below_plateau"):
        out.append(f"grid_below_plateau:{notes['grid_below_plateau']:g}")
    return out


def buffer_range(campaign: Campaign) -> tuple[float, float]:
    """The buffers a campaign measured: its curves are solved and drawn on this range only
    (a fitted curve is not extrapolated)."""
    grid = campaign.buffer_grid_mib
    return min(grid), max(grid)


def is_final(campaign: Campaign) -> bool:
    return campaign.state in FINAL_CAMPAIGN_STATES


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
