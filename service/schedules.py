"""Scheduled recalibration (cron per topology), its history, and the changes worth an event:
OPM or OCC changed, OBS moved by more than 10 %, an impact factor changed sign."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from models import Campaign, ImpactFactor, Recommendation, utcnow
from models.history import RecalibrationEvent, RecalibrationSchedule

from .campaigns import active_campaign, create_campaign
from .errors import Invalid, NotFound
from .inventory import get_topology

OBS_MOVE_THRESHOLD = 0.10


CongestionControl = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
Mib = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]


class CampaignParameters(BaseModel):
    """A campaign's plan (POST /campaigns, schedules); what is left out takes the settings'
    default, which is the paper's plan."""

    model_config = ConfigDict(extra="forbid")

    ccs: list[CongestionControl] | None = Field(default=None, min_length=1, max_length=16)
    pms: list[Literal["PCDC", "FullMesh"]] | None = Field(default=None, min_length=1, max_length=2)
    buffer_grid_mib: list[Mib] | None = Field(default=None, min_length=3, max_length=400)
    runs: int | None = Field(default=None, ge=1, le=100)
    duration_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)
    delta: float = Field(default=0.07, ge=0, lt=1, allow_inf_nan=False)
    model_kind: Literal["paper", "per-arm"] = "paper"
    probe_seconds_budget: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)


def check_cron(cron: str) -> str:
    cron = " ".join(cron.split())
    if len(cron) > 120 or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise Invalid(f"not a 5-field cron expression: {cron!r}", ("body", "cron"))
    return cron


def set_schedule(
    session: Session,
    topology_id: int,
    cron: str,
    enabled: bool = True,
    parameters: dict[str, Any] | None = None,
) -> RecalibrationSchedule:
    get_topology(session, topology_id)
    cron = check_cron(cron)
    try:
        params = CampaignParameters.model_validate(parameters or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise Invalid(err["msg"], ("body", "parameters", *err["loc"])) from None
    row = session.scalar(
        select(RecalibrationSchedule).where(RecalibrationSchedule.topology_id == topology_id)
    )
    if row is None:
        row = RecalibrationSchedule(topology_id=topology_id, cron=cron, created_at=utcnow())
        session.add(row)
    row.cron, row.enabled = cron, enabled
    row.parameters = params.model_dump(exclude_none=True)
    session.flush()
    return row


def get_schedule(session: Session, topology_id: int) -> RecalibrationSchedule:
    get_topology(session, topology_id)
    row = session.scalar(
        select(RecalibrationSchedule).where(RecalibrationSchedule.topology_id == topology_id)
    )
    if row is None:
        raise NotFound(f"topology {topology_id} has no recalibration schedule")
    return row


def delete_schedule(session: Session, topology_id: int) -> None:
    session.delete(get_schedule(session, topology_id))
    session.flush()


def next_run(schedule: RecalibrationSchedule) -> datetime:
    base = schedule.last_run_at or schedule.created_at
    return croniter(schedule.cron, base).get_next(datetime)


def queue_due_campaigns(session: Session, now: datetime | None = None) -> list[int]:
    """A campaign for every enabled schedule that is due and whose topology is not busy."""
    from .dispatch import dispatch_campaign

    now = now or utcnow()
    queued = []
    rows = session.scalars(
        select(RecalibrationSchedule).where(RecalibrationSchedule.enabled.is_(True))
    )
    for schedule in rows:
        if next_run(schedule) > now or active_campaign(session, schedule.topology_id):
            continue
        campaign = create_campaign(
            session, schedule.topology_id, reason="scheduled", **schedule.parameters
        )
        schedule.last_run_at, schedule.last_campaign_id = now, campaign.id
        dispatch_campaign(session, campaign.id)
        queued.append(campaign.id)
    session.flush()
    return queued


# --- history and events --------------------------------------------------------------------------
def _recommendation_of(session: Session, campaign_id: int) -> Recommendation | None:
    return session.scalar(
        select(Recommendation)
        .where(Recommendation.campaign_id == campaign_id, Recommendation.kind == "calibrated")
        .order_by(Recommendation.id)
        .limit(1)
    )


def calibration_history(session: Session, topology_id: int) -> list[dict[str, Any]]:
    """Every finished calibration of the topology, newest first, with what it recommended."""
    get_topology(session, topology_id)
    campaigns = session.scalars(
        select(Campaign)
        .where(Campaign.topology_id == topology_id, Campaign.state == "done")
        .order_by(Campaign.finished_at.desc(), Campaign.id.desc())
    )
    out = []
    for c in campaigns:
        rec = _recommendation_of(session, c.id)
        out.append(
            {
                "campaign_id": c.id,
                "reason": c.reason,
                "finished_at": c.finished_at,
                "recommendation_id": rec.id if rec else None,
                "opm": rec.opm if rec else None,
                "occ": rec.occ if rec else None,
                "obs_mib": rec.obs_mib if rec else None,
                "otp_mbps": rec.otp_mbps if rec else None,
            }
        )
    return out


def record_events(session: Session, campaign: Campaign) -> list[RecalibrationEvent]:
    """Compare a finished calibration with the previous one of its topology."""
    previous = session.scalar(
        select(Campaign)
        .where(
            Campaign.topology_id == campaign.topology_id,
            Campaign.state == "done",
            Campaign.id != campaign.id,
            Campaign.id < campaign.id,
        )
        .order_by(Campaign.id.desc())
        .limit(1)
    )
    if previous is None:
        return []
    new, old = _recommendation_of(session, campaign.id), _recommendation_of(session, previous.id)
    events: list[RecalibrationEvent] = []

    def add(kind: str, subject: str, before, after, change_pct=None) -> None:
        events.append(
            RecalibrationEvent(
                topology_id=campaign.topology_id,
                campaign_id=campaign.id,
                previous_campaign_id=previous.id,
                kind=kind,
                subject=subject,
                before=before,
                after=after,
                change_pct=change_pct,
                created_at=utcnow(),
            )
        )

    if new is not None and old is not None:
        if new.opm != old.opm:
            add("opm_changed", "opm", old.opm, new.opm)
        if new.occ != old.occ:
            add("occ_changed", "occ", old.occ, new.occ)
        if old.obs_mib and abs(new.obs_mib - old.obs_mib) / old.obs_mib > OBS_MOVE_THRESHOLD:
            add(
                "obs_moved",
                "obs_mib",
                old.obs_mib,
                new.obs_mib,
                100.0 * (new.obs_mib - old.obs_mib) / old.obs_mib,
            )
    before = _omegas(session, previous.id)
    for key, omega in _omegas(session, campaign.id).items():
        if key in before and (before[key] < 0) != (omega < 0):
            add("omega_sign_changed", f"{key[0]}/{key[1]}", before[key], omega)
    session.add_all(events)
    session.flush()
    return events


def _omegas(session: Session, campaign_id: int) -> dict[tuple[str, str], float]:
    rows = session.scalars(select(ImpactFactor).where(ImpactFactor.campaign_id == campaign_id))
    return {(r.cc, r.subflow): r.omega for r in rows}


def list_events(
    session: Session, topology_id: int, limit: int = 100, offset: int = 0
) -> list[RecalibrationEvent]:
    get_topology(session, topology_id)
    return list(
        session.scalars(
            select(RecalibrationEvent)
            .where(RecalibrationEvent.topology_id == topology_id)
            .order_by(RecalibrationEvent.id.desc())
            .limit(limit)
            .offset(offset)
        )
    )
