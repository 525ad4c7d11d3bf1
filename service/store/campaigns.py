"""Campaign rows: create, read, list, move through their states, and the probe lease.

Plain data access: every function takes the session and keyword arguments, flushes but never
commits. Choosing a campaign's plan and deciding what it does next belongs to `service.flows`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
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


# --- the probe lease: one probe in flight per campaign -------------------------------------------
def _locked(session: Session, campaign_id: int) -> Campaign:
    """The campaign row, locked until the transaction ends (PostgreSQL: SELECT ... FOR UPDATE;
    SQLite serialises writers anyway), with its columns read afresh."""
    campaign = session.scalar(
        select(Campaign)
        .where(Campaign.id == campaign_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if campaign is None:
        raise NotFound(f"campaign {campaign_id} not found")
    return campaign


def claim_lease(
    session: Session,
    *,
    campaign_id: int,
    step_key: list[Any],
    lasts: timedelta,
    now: datetime | None = None,
) -> str | None:
    """A lease id for running the step `step_key`, or None while another live lease holds the
    campaign. The row lock makes check-and-take atomic: two workers never hold one campaign."""
    now = now or utcnow()
    campaign = _locked(session, campaign_id)
    live = campaign.lease_id is not None and campaign.lease_until > now
    if live and campaign.lease_step != step_key:
        return None
    if live:
        return campaign.lease_id  # a redelivered request for the same step: the same lease
    campaign.lease_id = uuid.uuid4().hex
    campaign.lease_step = list(step_key)
    campaign.lease_until = now + lasts
    session.flush()
    return campaign.lease_id


def lease_is_live(session: Session, *, campaign_id: int, now: datetime | None = None) -> bool:
    campaign = get_campaign(session, campaign_id=campaign_id)
    return campaign.lease_id is not None and campaign.lease_until > (now or utcnow())


def release_lease(session: Session, *, campaign_id: int, lease_id: str) -> bool:
    """Drop the lease if it is still `lease_id`'s; False if someone else holds the campaign."""
    campaign = _locked(session, campaign_id)
    if campaign.lease_id != lease_id:
        return False
    drop_lease(campaign)
    session.flush()
    return True


def drop_lease(campaign: Campaign) -> None:
    campaign.lease_id, campaign.lease_step, campaign.lease_until = None, None, None


def renew_lease(
    session: Session, *, campaign_id: int, lease_id: str, lasts: timedelta
) -> bool:
    """The heartbeat: push the lease's end out if it is still `lease_id`'s; False otherwise."""
    campaign = _locked(session, campaign_id)
    if campaign.lease_id != lease_id:
        return False
    campaign.lease_until = utcnow() + lasts
    session.flush()
    return True


def expired_lease_campaign_ids(session: Session, *, now: datetime | None = None) -> list[int]:
    """Active campaigns whose lease ran out without being released: its holder died. Rows
    another transaction has locked are skipped (it is claiming or renewing them right now)."""
    now = now or utcnow()
    return _active_ids_unlocked(
        session, Campaign.lease_id.is_not(None), Campaign.lease_until <= now
    )


def _active_ids_unlocked(session: Session, *conditions) -> list[int]:
    """Ids of active campaigns meeting `conditions`, locked for this transaction; rows another
    transaction holds are skipped (SKIP LOCKED), not waited for."""
    return list(
        session.scalars(
            select(Campaign.id)
            .where(Campaign.state.in_(ACTIVE_CAMPAIGN_STATES), *conditions)
            .order_by(Campaign.id)
            .with_for_update(skip_locked=True)
        )
    )


# --- the dispatch outbox ----------------------------------------------------------------------
def owe_dispatch(campaign: Campaign) -> None:
    """A hand-over to the executor is owed (sent after commit; the sweeper retries it)."""
    campaign.dispatched_at = None


def mark_dispatched(session: Session, *, campaign_id: int, at: datetime | None = None) -> None:
    session.execute(
        update(Campaign).where(Campaign.id == campaign_id).values(dispatched_at=at or utcnow())
    )


def owed_dispatch_campaign_ids(session: Session, *, before: datetime) -> list[int]:
    """Active campaigns whose hand-over is owed since before `before` (locked ones skipped)."""
    return _active_ids_unlocked(
        session, Campaign.dispatched_at.is_(None), Campaign.updated_at <= before
    )


def untaken_dispatch_campaign_ids(
    session: Session, *, executor: str, before: datetime
) -> list[int]:
    """Active campaigns of `executor` handed over before `before` that no worker has taken
    since: no lease, and no fresher hand-over. A worker killed after it received the turn
    but before it claimed a probe leaves exactly this (its message was acknowledged)."""
    return _active_ids_unlocked(
        session,
        Campaign.executor == executor,
        Campaign.lease_id.is_(None),
        Campaign.dispatched_at.is_not(None),
        Campaign.dispatched_at <= before,
    )
