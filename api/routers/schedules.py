"""Scheduled recalibration per topology, its history, and the change events it raised."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from api.deps import Limit, Offset, SessionDep, commit, require_read, require_write
from api.schemas import MAX_ID
from models import EVENT_KINDS
from probes.vocabulary import PathManager
from service.flows.campaign.dispatch import plan_for
from service.flows.campaign.plan import CampaignParameters
from service.store import inventory
from service.store import schedules as svc

Id = Annotated[int, Path(ge=1, le=MAX_ID)]
router = APIRouter(tags=["recalibration"])


class ScheduleIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"cron": "0 3 * * *", "enabled": True, "parameters": {"runs": 3, "duration_s": 30}}
            ]
        },
    )

    cron: str = Field(min_length=9, max_length=120, description="5-field cron, UTC")
    enabled: bool = True
    parameters: CampaignParameters = Field(default_factory=CampaignParameters)


class ScheduleOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    topology_id: int
    cron: str
    enabled: bool
    parameters: dict[str, Any]
    last_run_at: datetime | None
    last_campaign_id: int | None
    next_run_at: datetime

    @classmethod
    def of(cls, row) -> ScheduleOut:
        return cls(
            topology_id=row.topology_id,
            cron=row.cron,
            enabled=row.enabled,
            parameters=row.parameters,
            last_run_at=row.last_run_at,
            last_campaign_id=row.last_campaign_id,
            next_run_at=svc.next_run(row),
        )


class HistoryEntry(BaseModel):
    campaign_id: int
    reason: str
    finished_at: datetime | None
    recommendation_id: int | None
    opm: PathManager | None
    occ: str | None
    obs_mib: float | None
    otp_mbps: float | None
    started_at: datetime | None = None
    noticed_at: datetime | None = Field(None, description="when this recalibration saw the "
                                        "path change: its warm check drifted, or a failover "
                                        "queued it")
    reapply: dict[str, Any] | None = Field(None, description="the re-apply of its answer "
                                           "(auto_reapply): apply_id, state, error, "
                                           "started_at, finished_at")


class EventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    topology_id: int
    campaign_id: int
    previous_campaign_id: int | None
    kind: Literal[EVENT_KINDS]
    subject: str
    before: Any
    after: Any
    change_pct: float | None
    created_at: datetime


@router.put(
    "/topologies/{topology_id}/schedule",
    response_model=ScheduleOut,
    dependencies=[Depends(require_write)],
    responses={401: {"description": "no valid token"}, 404: {"description": "unknown topology"}},
)
def put_schedule(topology_id: Id, body: ScheduleIn, request: Request, session: SessionDep):
    """Set (or replace) the topology's recalibration schedule; beat (with no broker: the API
    process itself) queues a campaign when due."""
    # Checked now, not when beat first runs it: a plan too large is a 422 here, never a failure
    # on every beat tick.
    topology = inventory.get_topology(session, topology_id=topology_id)
    plan_for(topology, body.parameters, request.app.state.settings)
    row = svc.set_schedule(
        session,
        topology_id=topology_id,
        cron=body.cron,
        enabled=body.enabled,
        parameters=body.parameters.model_dump(exclude_none=True),
    )
    commit(session)
    return ScheduleOut.of(row)


@router.get(
    "/topologies/{topology_id}/schedule",
    response_model=ScheduleOut,
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown topology, or no schedule"}},
)
def get_schedule(topology_id: Id, session: SessionDep):
    return ScheduleOut.of(svc.get_schedule(session, topology_id=topology_id))


@router.delete(
    "/topologies/{topology_id}/schedule",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[Depends(require_write)],
    responses={
        401: {"description": "no valid token"},
        404: {"description": "unknown topology, or no schedule"},
    },
)
def delete_schedule(topology_id: Id, session: SessionDep):
    svc.delete_schedule(session, topology_id=topology_id)
    commit(session)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/topologies/{topology_id}/history",
    response_model=list[HistoryEntry],
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown topology"}},
)
def get_history(topology_id: Id, session: SessionDep):
    """Every finished calibration of the topology, newest first, with its recommendation."""
    return svc.calibration_history(session, topology_id=topology_id)


@router.get(
    "/topologies/{topology_id}/events",
    response_model=list[EventOut],
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown topology"}},
)
def get_events(topology_id: Id, session: SessionDep, limit: Limit = 100, offset: Offset = 0):
    """OPM/OCC changes, OBS moves over 10 % and impact-factor sign changes between calibrations;
    the warm checks' verdicts; a failover's recalibration (`path_changed`) and the re-apply of a
    recalibration's answer (`reapply_started`, `reapply_refused`)."""
    events = svc.list_events(session, topology_id=topology_id, limit=limit, offset=offset)
    return [EventOut.model_validate(e) for e in events]
