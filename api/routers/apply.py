"""Applying an answer to the topology's sites: the plan, the apply, the rollback, the record."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from api.deps import SessionDep, commit, require_read, require_write
from api.schemas import MAX_ID
from service.flows.applying import apply as apply_flow
from service.flows.applying import failover_watch
from service.flows.applying.apply_plan import build_plan
from service.store import applied

Id = Annotated[int, Path(ge=1, le=MAX_ID)]
ERRORS = {401: {"description": "no valid token"}, 404: {"description": "unknown topology"},
          409: {"description": "no answer yet, sites not reachable, an apply in progress, or "
                "(apply) an answer no probe measured without allow_unmeasured"}}

router = APIRouter(tags=["apply"])
LOWER_CEILINGS = ("set the autotuning ceiling (tcp_rmem/tcp_wmem max) exactly as planned, even "
                  "below a higher one a site has; without it a higher ceiling is kept (an "
                  "apply never lowers a host's ceiling unless asked)")
ApplyId = Annotated[int, Path(ge=1, le=MAX_ID)]
# an apply or rollback settles within its confirmation (5-120 s) plus the sites' reports
POLL_AFTER_S = 5
ROLLBACK_STATES = ("rolling_back", "rolled_back")


def apply_url(topology_id: int, apply_id: int) -> str:
    return f"/topologies/{topology_id}/applies/{apply_id}"


def _accepted(response: Response, url: str) -> None:
    response.headers["Location"] = url
    response.headers["Retry-After"] = str(POLL_AFTER_S)


class ApplyPlanOut(BaseModel):
    """Per site every change the topology's newest answer needs, with the value it replaces."""

    topology_id: int
    recommendation_id: int
    answer: dict[str, Any]
    used: list[str]
    standbys: list[str]
    dropped: list[str]
    connect: dict[str, str]
    notes: list[str]
    measured: dict[str, Any]
    buffer: dict[str, Any]
    lower_ceilings: bool = False
    scopes: dict[str, Any]
    sites: list[dict[str, Any]]


class ApplyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    confirm: bool = Field(True, description="run the confirmation transfer after applying")
    seconds: float = Field(10.0, ge=5, le=120, allow_inf_nan=False,
                           description="the confirmation transfer's length")
    watch: bool = Field(True, description="once applied, each site's worker starts its "
                        "failover watcher (docs/workers.md)")
    hold_s: float = Field(failover_watch.HOLD_S, ge=failover_watch.HOLD_S_RANGE[0],
                          le=failover_watch.HOLD_S_RANGE[1], allow_inf_nan=False,
                          description="how long a failed link must stay up again before "
                          "the watcher uses it again, s")
    allow_unmeasured: bool = Field(False, description="apply an answer no probe measured (a "
                                   "provisional one: no CC, a rule-of-thumb buffer); without "
                                   "it such an answer is refused with 409")
    lower_ceilings: bool = Field(False, strict=True, description=LOWER_CEILINGS)
    auto_reapply: bool = Field(False, description="when a recalibration of the topology gives "
                               "a new answer, apply it too through the same plan and checks "
                               "(with this apply's confirm, seconds, watch and hold_s), unless "
                               "MPCOA_REAPPLY_ON_RECALIBRATION is false")


class AppliedOut(BaseModel):
    id: int
    topology_id: int
    recommendation_id: int | None
    state: str
    sites: dict[str, Any]
    confirmation: dict[str, Any] | None
    events: list[dict[str, Any]]
    error: str | None
    action: str | None = Field(None, description="what is in flight (apply, rollback); "
                               "null once settled")
    dispatched_at: datetime | None = Field(None, description="when the sites' workers were "
                                           "handed the action; null while it is owed (the "
                                           "broker is down: the sweeper sends it)")
    deadline_at: datetime | None = Field(None, description="past it, an action still in "
                                         "flight is settled from the sites' journals")
    created_at: datetime
    applied_at: datetime | None
    finished_at: datetime | None
    plan: dict[str, Any]

    @classmethod
    def of(cls, row) -> AppliedOut:
        return cls.model_validate(row, from_attributes=True)


def _engine(session) -> Engine | None:
    """Where the hand-over is recorded: the request's database (a test's session bound to a
    connection: the configured one)."""
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else None


@router.get("/topologies/{topology_id}/apply-plan", response_model=ApplyPlanOut,
            dependencies=[Depends(require_read)], responses=ERRORS,
            summary="What applying the newest answer would change on each site")
def get_apply_plan(topology_id: Id, session: SessionDep,
                   lower_ceilings: Annotated[bool, Query(description=LOWER_CEILINGS)] = False):
    return build_plan(session, topology_id, lower_ceilings=lower_ceilings)


@router.post("/topologies/{topology_id}/apply", response_model=AppliedOut,
             status_code=status.HTTP_202_ACCEPTED, dependencies=[Depends(require_write)],
             responses=ERRORS, summary="Apply the newest answer on both sites, then confirm it")
def apply_answer(topology_id: Id, request: Request, response: Response, session: SessionDep,
                 body: ApplyIn | None = None):
    body = body or ApplyIn()
    row = apply_flow.start_apply(session, topology_id=topology_id, confirm=body.confirm,
                                 seconds=body.seconds, watch=body.watch, hold_s=body.hold_s,
                                 allow_unmeasured=body.allow_unmeasured,
                                 auto_reapply=body.auto_reapply,
                                 lower_ceilings=body.lower_ceilings,
                                 site_hosts=bool(request.app.state.settings.broker_url))
    commit(session)
    # sent now, or owed (the broker is down): 202 with the row either way, `dispatched_at`
    # says which
    apply_flow.dispatch(row.id, row.plan, "apply", request.app.state.settings,
                        engine=_engine(session))
    session.refresh(row)
    _accepted(response, apply_url(topology_id, row.id))
    return AppliedOut.of(row)


@router.post("/topologies/{topology_id}/rollback", response_model=AppliedOut,
             status_code=status.HTTP_202_ACCEPTED, dependencies=[Depends(require_write)],
             responses={**ERRORS, 200: {"description": "already rolled back: nothing to do",
                                        "model": AppliedOut}},
             summary="Restore the sites as before the first apply (the apply in force)")
def roll_back(topology_id: Id, request: Request, response: Response, session: SessionDep):
    row = apply_flow.start_rollback(session, topology_id=topology_id,
                                    site_hosts=bool(request.app.state.settings.broker_url))
    commit(session)
    if row.state != "rolling_back":  # a repeated rollback: the first one ran meanwhile
        response.status_code = status.HTTP_200_OK
        return AppliedOut.of(row)
    # sent now, or owed (the broker is down): 202 with the row either way, `dispatched_at`
    # says which
    apply_flow.dispatch(row.id, row.plan, "rollback", request.app.state.settings,
                        engine=_engine(session))
    session.refresh(row)
    _accepted(response, apply_url(topology_id, row.id) + "/rollback")
    return AppliedOut.of(row)


@router.get("/topologies/{topology_id}/applied", response_model=list[AppliedOut],
            dependencies=[Depends(require_read)], responses=ERRORS,
            summary="The applies of the topology's answers, newest first")
def list_applied(topology_id: Id, session: SessionDep,
                 limit: Annotated[int, Query(ge=1, le=100)] = 20):
    from service.store import inventory

    inventory.get_topology(session, topology_id=topology_id)
    return [AppliedOut.of(r) for r in applied.list_applies(session, topology_id=topology_id,
                                                           limit=limit)]


@router.get("/topologies/{topology_id}/applies", response_model=list[AppliedOut],
            dependencies=[Depends(require_read)], responses=ERRORS,
            summary="The applies of the topology's answers, newest first (also at /applied)")
def list_applies(topology_id: Id, session: SessionDep,
                 limit: Annotated[int, Query(ge=1, le=100)] = 20):
    return list_applied(topology_id, session, limit)


def _apply_of(session, topology_id: int, apply_id: int):
    from service.errors import NotFound
    from service.store import inventory

    inventory.get_topology(session, topology_id=topology_id)
    row = applied.get_apply(session, apply_id=apply_id)
    if row.topology_id != topology_id:
        raise NotFound(f"apply {apply_id} not found for topology {topology_id}")
    return row


@router.get("/topologies/{topology_id}/applies/{apply_id}", response_model=AppliedOut,
            dependencies=[Depends(require_read)],
            responses={404: {"description": "unknown topology or apply"}},
            summary="One apply: its state, the sites' reports, the confirmation, the events")
def get_apply(topology_id: Id, apply_id: ApplyId, session: SessionDep):
    return AppliedOut.of(_apply_of(session, topology_id, apply_id))


@router.get("/topologies/{topology_id}/applies/{apply_id}/rollback", response_model=AppliedOut,
            dependencies=[Depends(require_read)],
            responses={404: {"description": "unknown topology or apply, or never rolled back"}},
            summary="The rollback of one apply: the apply's record while and once it is undone")
def get_rollback(topology_id: Id, apply_id: ApplyId, session: SessionDep):
    from service.errors import NotFound

    row = _apply_of(session, topology_id, apply_id)
    rolled = (row.state in ROLLBACK_STATES or row.action == "rollback"
              or any((rep or {}).get("state") in ROLLBACK_STATES
                     for rep in (row.sites or {}).values()))
    if not rolled:
        raise NotFound(f"apply {apply_id} was not rolled back")
    return AppliedOut.of(row)
