"""A campaign's life (queued -> running -> done / failed / cancelled, and a retry) and its run
state (service/state/campaign_state.py): what moves a campaign row between states, and how a phase
records what it decided.

Plain data access like `store.campaigns`: flushes, never commits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy.orm import Session

from models import CAMPAIGN_STATES, FINAL_CAMPAIGN_STATES, Campaign, utcnow

from ..errors import Conflict, Invalid, NotFound
from ..state import CampaignState, put_state, state_of

_TRANSITIONS = {
    "queued": {"running", "cancelled", "failed"},
    "running": {"done", "failed", "cancelled"},
    "done": set(),
    "failed": {"queued"},  # a retry
    "cancelled": {"queued"},
}


def set_state(
    session: Session, *, campaign_id: int, state: str, error: str | None = None
) -> Campaign:
    """Move a campaign to `state` (queued -> running -> done/failed, or cancelled)."""
    if state not in CAMPAIGN_STATES:
        raise Invalid(f"must be one of {CAMPAIGN_STATES}", ("body", "state"))
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise NotFound(f"campaign {campaign_id} not found")
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


def is_final(campaign: Campaign) -> bool:
    return campaign.state in FINAL_CAMPAIGN_STATES


def save_state(campaign: Campaign, state: CampaignState) -> None:
    """Save the state a phase returned (`PhaseVerdict.state`) as the campaign's."""
    put_state(campaign, state)


def update_state(campaign: Campaign, **changes: Any) -> CampaignState:
    """Record what a phase decided: the campaign's state with `changes` (its field names)."""
    state = replace(state_of(campaign), **changes)
    put_state(campaign, state)
    return state
