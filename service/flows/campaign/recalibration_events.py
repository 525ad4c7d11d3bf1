"""After a calibration, what changed since the topology's previous one that is worth an
operator's look: OPM or OCC changed, OBS moved by more than 10 %, an impact factor changed sign.
Finishing a campaign records them; nothing here starts a campaign."""

from __future__ import annotations

from sqlalchemy.orm import Session

from models import Campaign
from models.history import RecalibrationEvent

from ...algorithm.impact import sign_flipped
from ...store import recommendations, results, schedules

OBS_MOVE_THRESHOLD = 0.10


def record_events(session: Session, *, campaign: Campaign) -> list[RecalibrationEvent]:
    """Compare a finished calibration with the previous one of its topology."""
    previous = schedules.previous_calibration(session, campaign=campaign)
    if previous is None:
        return []
    events: list[RecalibrationEvent] = []

    def add(kind: str, subject: str, before, after, change_pct=None) -> None:
        events.append(schedules.add_event(
            session, campaign=campaign, previous_campaign_id=previous.id, kind=kind,
            subject=subject, before=before, after=after, change_pct=change_pct))

    new = recommendations.calibrated_recommendation_of(session, campaign_id=campaign.id)
    old = recommendations.calibrated_recommendation_of(session, campaign_id=previous.id)
    if new is not None and old is not None:
        if new.opm != old.opm:
            add("opm_changed", "opm", old.opm, new.opm)
        if new.occ != old.occ:
            add("occ_changed", "occ", old.occ, new.occ)
        moved = _relative_move(old.obs_mib, new.obs_mib)
        if moved is not None and abs(moved) > OBS_MOVE_THRESHOLD:
            add("obs_moved", "obs_mib", old.obs_mib, new.obs_mib, 100.0 * moved)
    before = results.omegas_of(session, campaign_id=previous.id)
    for key, omega in results.omegas_of(session, campaign_id=campaign.id).items():
        if key in before and sign_flipped(before[key], omega):
            add("omega_sign_changed", f"{key[0]}/{key[1]}", before[key], omega)
    return events


def _relative_move(old: float | None, new: float | None) -> float | None:
    if not old or new is None:
        return None
    return (new - old) / old
