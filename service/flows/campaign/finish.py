"""The end of a campaign: mark it done, answer from its fits, note what changed since the
previous calibration, and say what is left for others to do. Executors call `finish_campaign`
when `next_step` says so and act on what it returns (`Finished.events`).

Finishing stays inside the campaign domain and the answers below it: the answer is stored and
the changes recorded in the finishing transaction, and what belongs to a domain above (a
recalibration's new answer re-applied where the apply in force asked for it: `ReapplyDue`) is
returned as an event for the executor to hand on (`scheduling.reapply.after_finish`). Nothing
this module imports can start a campaign (pyproject.toml's import contracts)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from ...store import campaigns as campaign_store
from ...store import measurements
from ..answers.stored_answer import answer_at_finish
from .recalibration_events import record_events

#: the campaigns that recalibrate a topology (a user's own calibration is the user's to apply)
RECALIBRATING = ("scheduled", "path_changed")


@dataclass(frozen=True)
class AnswerStored:
    """The campaign's answer is stored (None: it has none)."""

    recommendation_id: int | None


@dataclass(frozen=True)
class RecalibrationRecorded:
    """What changed since the topology's previous calibration, recorded (the events' ids)."""

    event_ids: tuple[int, ...]


@dataclass(frozen=True)
class ReapplyDue:
    """A recalibration finished: its topology's apply in force may owe a re-apply."""

    campaign_id: int
    topology_id: int


FinishEvent = AnswerStored | RecalibrationRecorded | ReapplyDue


@dataclass(frozen=True)
class Finished:
    """What finishing a campaign did and left to do; no events: it was final already."""

    campaign_id: int
    recommendation_id: int | None
    events: tuple[FinishEvent, ...] = ()

    @property
    def reapply_due(self) -> ReapplyDue | None:
        return next((e for e in self.events if isinstance(e, ReapplyDue)), None)


def finish_campaign(session: Session, *, campaign_id: int) -> Finished:
    """Finish a campaign whose probes are all stored: done, its answer stored, the changes
    since the previous calibration recorded; what is left to do is in the events returned.

    Idempotent: a campaign that is already final is left as it is (a redelivered task), and
    says so with no events. The answer is stored once, with the campaign's own flags and notes
    (an adaptive campaign's is its sweep's decision, `decided`), as it is: nothing patches it
    afterwards.
    """
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return Finished(campaign.id, campaign.recommendation_id)
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
    changes = record_events(session, campaign=campaign)
    events: list[FinishEvent] = [AnswerStored(outcome.recommendation_id),
                                 RecalibrationRecorded(tuple(e.id for e in changes))]
    if campaign.reason in RECALIBRATING:
        events.append(ReapplyDue(campaign.id, campaign.topology_id))
    return Finished(campaign.id, outcome.recommendation_id, tuple(events))
