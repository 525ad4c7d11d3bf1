"""The probe lease: one probe in flight per campaign, and only its owner measures and stores.

A lease is four columns of the campaign row: its id (which also holds the two sites' locks,
`store.sitelocks`), the step it runs, until when it lives, and its owner. Every change takes the
row lock (PostgreSQL: SELECT ... FOR UPDATE; SQLite serialises writers anyway), so check and change
are atomic, and a caller that keeps the lock to its commit fences whatever it writes beside.

Ownership: the claimant gets a fresh lease only under its own token, and a live lease is given
again to that owner only. The claimant hands the lease on with its token (a task's message); the
execution that runs the probe takes it over under a token of its own (`take_over`), so a second
copy of the same message (a broker's redelivery) finds the lease taken and does nothing. The
owner renews while it probes and hands the lease back when its attempt ends (`renew_lease`).
Flush, never commit.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from models import Campaign, utcnow

from ..errors import NotFound
from .campaigns import active_ids_skip_locked, get_campaign


def new_owner() -> str:
    """A token naming one claimant or one execution of a probe."""
    return uuid.uuid4().hex


def _locked(session: Session, campaign_id: int) -> Campaign:
    """The campaign row, locked until the transaction ends, with its columns read afresh."""
    campaign = session.scalar(
        select(Campaign)
        .where(Campaign.id == campaign_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if campaign is None:
        raise NotFound(f"campaign {campaign_id} not found")
    return campaign


def _live(campaign: Campaign, now: datetime) -> bool:
    return campaign.lease_id is not None and campaign.lease_until > now


def claim_lease(
    session: Session,
    *,
    campaign_id: int,
    step_key: list[Any],
    owner: str,
    lasts: timedelta,
    now: datetime | None = None,
) -> str | None:
    """A lease id for running the step `step_key` under `owner`, or None while a live lease
    holds the campaign for another step or another owner."""
    now = now or utcnow()
    campaign = _locked(session, campaign_id)
    if _live(campaign, now):
        if campaign.lease_step == step_key and campaign.lease_owner == owner:
            return campaign.lease_id  # the owner asking again: its own lease
        return None
    campaign.lease_id = uuid.uuid4().hex
    campaign.lease_step = list(step_key)
    campaign.lease_until = now + lasts
    campaign.lease_owner = owner
    session.flush()
    return campaign.lease_id


def take_over(
    session: Session,
    *,
    campaign_id: int,
    lease_id: str,
    handed: str | None,
    owner: str,
    now: datetime | None = None,
) -> bool:
    """Make `owner` the one who runs the live lease `lease_id`, if it was handed on as
    `handed` (or is `owner`'s already); False: it is another's, or it ran out."""
    campaign = _locked(session, campaign_id)
    if campaign.lease_id != lease_id or not _live(campaign, now or utcnow()):
        return False
    if campaign.lease_owner not in (handed, owner):
        return False
    campaign.lease_owner = owner
    session.flush()
    return True


def renew_lease(
    session: Session,
    *,
    campaign_id: int,
    lease_id: str,
    owner: str | None,
    lasts: timedelta,
    hand_to: str | None = None,
) -> bool:
    """Push the lease's end out to now + lasts if `owner` still has it, and hand it to
    `hand_to` if given; False otherwise. An owner whose lease ran out but that nobody took
    has it still (taking it needs a new claim, which gives a new id)."""
    campaign = _locked(session, campaign_id)
    if campaign.lease_id != lease_id or campaign.lease_owner != owner:
        return False
    campaign.lease_until = utcnow() + lasts
    if hand_to is not None:
        campaign.lease_owner = hand_to
    session.flush()
    return True


def release_lease(
    session: Session, *, campaign_id: int, lease_id: str, owner: str | None
) -> bool:
    """Drop the lease if `owner` has it; False if someone else holds the campaign."""
    campaign = _locked(session, campaign_id)
    if campaign.lease_id != lease_id or campaign.lease_owner != owner:
        return False
    drop_lease(campaign)
    session.flush()
    return True


def drop_lease(campaign: Campaign) -> None:
    campaign.lease_id, campaign.lease_step, campaign.lease_until = None, None, None
    campaign.lease_owner = None


def lease_is_live(session: Session, *, campaign_id: int, now: datetime | None = None) -> bool:
    return _live(get_campaign(session, campaign_id=campaign_id), now or utcnow())


def expired_lease_campaign_ids(session: Session, *, now: datetime | None = None) -> list[int]:
    """Active campaigns whose lease ran out without being released: its holder died. Rows
    another transaction has locked are skipped (it is claiming or renewing them right now)."""
    now = now or utcnow()
    return active_ids_skip_locked(
        session, Campaign.lease_id.is_not(None), Campaign.lease_until <= now
    )
