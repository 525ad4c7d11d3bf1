"""The dispatch outbox: a campaign's hand-over to its executor is owed in the same transaction
that makes it due, sent after commit, and marked when sent; the sweeper (`flows.campaign.dispatch`)
sends the ones still owed (the broker was down) and re-sends the turns nobody took. Flush, never
commit.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from models import Campaign, utcnow

from .campaigns import active_ids_skip_locked


def owe_dispatch(campaign: Campaign) -> None:
    """A hand-over to the executor is owed (sent after commit; the sweeper retries it)."""
    campaign.dispatched_at = None


def mark_dispatched(session: Session, *, campaign_id: int, at: datetime | None = None) -> None:
    session.execute(
        update(Campaign).where(Campaign.id == campaign_id).values(dispatched_at=at or utcnow())
    )


def owed_dispatch_campaign_ids(session: Session, *, before: datetime) -> list[int]:
    """Active campaigns whose hand-over is owed since before `before` (locked ones skipped)."""
    return active_ids_skip_locked(
        session, Campaign.dispatched_at.is_(None), Campaign.updated_at <= before
    )


def untaken_dispatch_campaign_ids(
    session: Session, *, executor: str, before: datetime
) -> list[int]:
    """Active campaigns of `executor` handed over before `before` that no worker has taken
    since: no lease, and no fresher hand-over. A worker killed after it received the turn
    but before it claimed a probe leaves exactly this (its message was acknowledged)."""
    return active_ids_skip_locked(
        session,
        Campaign.executor == executor,
        Campaign.lease_id.is_(None),
        Campaign.dispatched_at.is_not(None),
        Campaign.dispatched_at <= before,
    )
