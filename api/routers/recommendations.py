"""POST a topology, get OPM / OCC / OBS; read back every answer given (Table 5)."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response, status
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

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
from api.schemas import (
    MAX_ID,
    RECOMMENDATION_EXAMPLES,
    Page,
    RecommendationIn,
    RecommendationOut,
)
from service.cache import LRU
from service.flows.recommend import recommend
from service.settings import Settings
from service.store import recommendations as store
from service.store import tokens

router = APIRouter(tags=["recommendations"])


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
    # async, with the token check and the blocking work in one thread hop (the token was already
    # found live by api.middleware.WriteGate before the body was read; this is the authoritative
    # check: revocation, expiry, scope). The body is sent as cached bytes: a repeated question
    # costs no response validation either.
    memory = _memory(request.app)
    content = memory.answer(credentials, body)
    if content is not None:
        return Response(content, media_type="application/json")
    content, provisional, poll_url = await in_lane(
        "work", _checked, session, credentials, body, request.app.state.settings, memory
    )
    if provisional:
        return Response(content, status.HTTP_202_ACCEPTED, {"Location": poll_url or ""},
                        media_type="application/json")
    return Response(content, media_type="application/json")


def _checked(session, credentials, body, settings, memory) -> tuple[bytes, bool, str | None]:
    check_token(session, credentials, scope="write")
    memory.token_checked(credentials)
    content, provisional, poll_url = _recommend(session, body, settings)
    if not provisional:
        memory.remember(body, content)
    return content, provisional, poll_url


class AnswerMemory:
    """Opt-in (`MPCOA_ANSWER_CACHE_S` > 0, default off): a calibrated answer to a question by
    topology_id is sent again from memory for that many seconds, with no thread hop and no
    database, to a token this process checked within that time. The price: a PATCHed topology, a
    new calibration or a revoked token take up to that long to show in this process."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._answers: dict[tuple, tuple[float, bytes]] = {}
        self._tokens: dict[str, float] = {}

    @staticmethod
    def _key(body: RecommendationIn) -> tuple:
        return body.topology_id, body.delta, body.bs_min_mib, body.bs_max_mib

    def answer(self, credentials, body: RecommendationIn) -> bytes | None:
        if self.ttl_s <= 0 or body.topology_id is None or credentials is None:
            return None
        now = time.monotonic()
        checked = self._tokens.get(tokens.hash_token(credentials.credentials))
        hit = self._answers.get(self._key(body))
        if checked is None or hit is None or now - checked > self.ttl_s:
            return None
        return hit[1] if now - hit[0] <= self.ttl_s else None

    def token_checked(self, credentials) -> None:
        if self.ttl_s > 0:
            self._bounded(self._tokens)[tokens.hash_token(credentials.credentials)] = (
                time.monotonic()
            )

    def remember(self, body: RecommendationIn, content: bytes) -> None:
        if self.ttl_s > 0 and body.topology_id is not None:
            self._bounded(self._answers)[self._key(body)] = (time.monotonic(), content)

    @staticmethod
    def _bounded(mapping: dict) -> dict:
        if len(mapping) > 10_000:
            mapping.clear()
        return mapping


def _memory(app) -> AnswerMemory:
    memory = getattr(app.state, "answer_memory", None)
    if memory is None:
        memory = app.state.answer_memory = AnswerMemory(app.state.settings.answer_cache_s)
    return memory


def _recommend(
    session: Session, body: RecommendationIn, settings: Settings
) -> tuple[bytes, bool, str | None]:
    try:
        return _answer(session, body, settings)
    except IntegrityError:
        # Lost a race to a concurrent request (an inline site or topology, the topology's one
        # active campaign): after the rollback the winner's rows are visible and are reused.
        session.rollback()
        return _answer(session, body, settings)


def _answer(
    session: Session, body: RecommendationIn, settings: Settings
) -> tuple[bytes, bool, str | None]:
    outcome = recommend(
        session,
        topology_id=body.topology_id,
        topology=body.topology.spec() if body.topology else None,
        rtts_ms=body.topology.rtts_ms if body.topology else None,
        delta=body.delta,
        bs_min_mib=body.bs_min_mib,
        bs_max_mib=body.bs_max_mib,
        settings=settings,
        reuse=True,
    )
    if outcome.recommendation is not None:
        session.commit()
        out = RecommendationOut.of(outcome.recommendation)
        content = out.model_dump_json().encode()
        if not outcome.provisional:
            _outs.put((_db(session), out.id), content)
        return content, outcome.provisional, out.poll_url
    # The question was answered before: nothing to write, and the answer's body is cached.
    session.rollback()
    key = (_db(session), outcome.recommendation_id)
    content = _outs.get(key)
    if content is None:
        rec = store.get_recommendation(session, recommendation_id=outcome.recommendation_id)
        content = RecommendationOut.of(rec).model_dump_json().encode()
        _outs.put(key, content)
    return content, False, None


# Stored calibrated answers as sent (a row is not changed once its transaction committed).
_outs: LRU[bytes] = LRU(1024)


def _db(session: Session) -> str:
    return str(session.get_bind().engine.url)


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
    return Page[RecommendationOut](
        items=[RecommendationOut.of(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.get(
    "/recommendations/{recommendation_id}",
    response_model=RecommendationOut,
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown id"}},
)
def get_recommendation(
    recommendation_id: Annotated[int, Path(ge=1, le=MAX_ID)], session: SessionDep
):
    return RecommendationOut.of(
        store.get_recommendation(session, recommendation_id=recommendation_id)
    )
