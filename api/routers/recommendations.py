"""POST a topology, get OPM / OCC / OBS; read back every answer given (Table 5)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response, status

from api.deps import (
    Credentials,
    LaneSession,
    Limit,
    Offset,
    SessionDep,
    check_token,
    in_lane,
    require_read,
)
from api.metrics import AnswerTimer
from api.schemas import (
    MAX_ID,
    RECOMMENDATION_EXAMPLES,
    Page,
    RecommendationIn,
    RecommendationOut,
)
from service.flows.answers.answer_cache import GenerationReader, answers
from service.flows.answers.ask import SentAnswer, ask, ask_request, database_of
from service.flows.campaign import dispatch
from service.store import answer_generation, tokens
from service.store import recommendations as store

router = APIRouter(tags=["recommendations"])
POLL_AFTER_S = 5  # the campaign behind a provisional answer: its probes last seconds each


@router.post(
    "/recommendations",
    response_model=RecommendationOut,
    summary="Recommend PM, CC and buffer for a topology",
    responses={
        200: {"description": "calibrated: from the topology's latest campaign's fits"},
        202: {
            "description": "provisional: the paper's rules; a campaign is queued, poll its URL",
            "model": RecommendationOut,
        },
        401: {"description": "no valid token"},
        404: {"description": "unknown topology_id"},
        409: {"description": "an inline site exists with other ISPs"},
    },
)
async def create_recommendation(
    request: Request,
    session: LaneSession,
    credentials: Credentials,
    body: Annotated[RecommendationIn, Body(openapi_examples=RECOMMENDATION_EXAMPLES)],
):
    # The flow (`ask_request`): from the cache with no thread hop when it can, else one thread
    # hop (`_checked`) for the token check (the authoritative one: revocation, expiry, scope;
    # api.middleware.WriteGate only turned away writes without a live token before the body
    # was read) and the answer.
    with AnswerTimer() as timer:
        desk = _desk(request.app)
        digest = tokens.hash_token(credentials.credentials) if credentials is not None else None
        asked = await ask_request(
            database=desk.database, token_digest=digest, topology_id=body.topology_id,
            delta=body.delta, bs_min_mib=body.bs_min_mib, bs_max_mib=body.bs_max_mib,
            objective=body.objective, fresh_generation=desk.reader.fresh,
            answer=partial(in_lane, "work", _checked, session, credentials, digest, body,
                           request.app.state.settings, desk))
        timer.source = asked.source
        if asked.provisional:
            return Response(asked.content, status.HTTP_202_ACCEPTED,
                            {"Location": asked.poll_url or "", "Retry-After": str(POLL_AFTER_S)},
                            media_type="application/json")
        return Response(asked.content, media_type="application/json")


def _checked(session, credentials, digest, body, settings, desk, generation: int | None,
             looked_up: bool) -> SentAnswer:
    # The generation first (unless the request read it already, before anything else):
    # whatever this request caches is then at least as new as it.
    if generation is None:
        generation = answer_generation.current(session)
    row = check_token(session, credentials, scope="write", now=answers.clock())
    database = database_of(session)
    desk.database = database
    answers.remember_token(database, digest, generation, row)
    return ask(
        session,
        render=_render,
        settings=settings,
        topology_id=body.topology_id,
        topology=body.topology.spec() if body.topology else None,
        rtts_ms=body.topology.rtts_ms if body.topology else None,
        delta=body.delta,
        bs_min_mib=body.bs_min_mib,
        bs_max_mib=body.bs_max_mib,
        generation=generation,
        looked_up=looked_up,
        objective=body.objective,
        queue=dispatch.campaign_for_question,
    )


def _render(rec) -> tuple[bytes, str | None]:
    """The answer as sent, whichever route sends it (pydantic's JSON, provenance keys sorted)."""
    out = RecommendationOut.of(rec)
    return out.model_dump_json().encode(), out.poll_url


class _Desk:
    """Per app: which database it answers from (known after its first request) and the shared
    reader of that database's answer generation."""

    def __init__(self, session_factory) -> None:
        self.database: str | None = None
        self.held = answer_generation.HeldReader(session_factory)
        self.reader = GenerationReader(partial(in_lane, "work", self.held.read))


def close_desk(app) -> None:
    """Closes the connection the app's generation reads keep (at the app's shutdown)."""
    desk = getattr(app.state, "answer_desk", None)
    if desk is not None:
        desk.held.close()


def _desk(app) -> _Desk:
    desk = getattr(app.state, "answer_desk", None)
    if desk is None:
        desk = app.state.answer_desk = _Desk(app.state.session_factory)
    return desk


@router.get(
    "/recommendations",
    response_model=Page[RecommendationOut],
    dependencies=[Depends(require_read)],
    summary="Table 5: every recommendation given, newest first",
)
def list_recommendations(
    session: SessionDep,
    topology_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    kind: Annotated[Literal["calibrated", "provisional"] | None, Query()] = None,
    limit: Limit = 50,
    offset: Offset = 0,
):
    rows, total = store.list_recommendations(
        session, topology_id=topology_id, kind=kind, limit=limit, offset=offset
    )
    page = Page[RecommendationOut](
        items=[RecommendationOut.of(r) for r in rows], total=total, limit=limit, offset=offset
    )
    return Response(page.model_dump_json(), media_type="application/json")


@router.get(
    "/recommendations/{recommendation_id}",
    response_model=RecommendationOut,
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown id"}},
)
def get_recommendation(
    recommendation_id: Annotated[int, Path(ge=1, le=MAX_ID)], session: SessionDep
):
    # The bytes POST /recommendations sends for this answer (`_render`): one serialisation.
    content, _poll_url = _render(
        store.get_recommendation(session, recommendation_id=recommendation_id))
    return Response(content, media_type="application/json")
