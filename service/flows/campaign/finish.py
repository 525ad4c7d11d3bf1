"""The end of a campaign: mark it done, answer from its fits, and note what changed since the
previous calibration. Executors call `finish_campaign` when `next_step` says so."""

from __future__ import annotations

from sqlalchemy.orm import Session

from ...store import campaigns as campaign_store
from ...store import measurements
from ..answers.stored_answer import answer_at_finish
from ..scheduling.recalibration_events import record_events


def finish_campaign(session: Session, *, campaign_id: int) -> int | None:
    """Finish a campaign whose probes are all stored; returns its recommendation's id.

    Idempotent: a campaign that is already final is left as it is (a redelivered task).
    The answer is stored once, with the campaign's own flags and notes (an adaptive campaign's
    is its sweep's decision, `decided`), as it is: nothing patches it afterwards.
    """
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return campaign.recommendation_id
    failed = measurements.failed_measurements(session, campaign_id=campaign.id)
    campaign_store.update_state(
        campaign, failed_probes=tuple(measurements.failure_entry(m) for m in failed)
    )
    campaign_store.set_state(session, campaign_id=campaign.id, state="done")
    # A finished campaign never queues another one, even when its fits are unusable: nothing
    # this module imports can start a campaign (pyproject.toml's import contracts).
    outcome = answer_at_finish(session, campaign)
    campaign.recommendation_id = outcome.recommendation_id
    session.flush()
    record_events(session, campaign=campaign)
    return outcome.recommendation_id
