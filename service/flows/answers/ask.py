"""A question asked over the API, answered through the answer cache.

`ask_request` is the request's flow: a question by topology id that this process answered under
the current answer generation, from a token it found live under it, is sent from the cache with
no thread hop (the generation read once for all the requests waiting, `GenerationReader`);
otherwise `answer` -- the caller's one thread hop: the token check, then `ask` -- goes on with
the generation read (read once per request) and does not look the question up again.

`ask` is the whole unit of work: the cached answer when the generation read first still holds
(the generation read and the cache looked up once per request, by the caller or here),
else `recommend` (reusing the stored row for a question asked before), the commit, the answer
rendered as sent, and the cache entry. The caller renders (`render`) so that a cache hit costs
neither a query nor a serialisation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from models import Recommendation

from ...algorithm import topology as algo
from ...algorithm.objective import Objective
from ...settings import Settings
from ...store import answer_generation, recommendations
from .answer_cache import AnswerCache, Remembered, answers
from .recommend import QueueCampaign, recommend


@dataclass(frozen=True)
class SentAnswer:
    content: bytes
    provisional: bool = False
    poll_url: str | None = None
    source: str = "solved"  # cache | solved | provisional (the answer-latency metric's label)


async def ask_request(
    *,
    database: str | None,
    token_digest: str | None,
    topology_id: int | None,
    delta: float,
    bs_min_mib: float | None,
    bs_max_mib: float | None,
    objective: Objective,
    fresh_generation: Callable[[], Awaitable[int]],
    answer: Callable[[int | None, bool], Awaitable[SentAnswer]],
    cache: AnswerCache = answers,
) -> SentAnswer:
    """The answer to one request (see the module's docstring). `database`: the one the caller
    answers from, once known (None before its first answer: nothing can be cached yet);
    `fresh_generation()`: a read of the answer generation that starts after the call;
    `answer(generation, looked_up)`: the thread hop that checks the token and calls `ask`."""
    generation, looked_up = None, False
    if topology_id is not None and token_digest is not None and database is not None:
        generation = await fresh_generation()
        if cache.token(database, token_digest, generation, "write"):
            question = cache.question(database, topology_id, delta, bs_min_mib, bs_max_mib,
                                      objective.key())
            hit = cache.answer(question, generation)
            if hit is not None:
                return SentAnswer(hit.content, source="cache")
            looked_up = True
    return await answer(generation, looked_up)


def database_of(session: Session) -> str:
    """Which database a session talks to: cached answers are per database."""
    return str(session.get_bind().engine.url)


def ask(
    session: Session,
    *,
    render: Callable[[Recommendation], tuple[bytes, str | None]],
    settings: Settings,
    topology_id: int | None = None,
    topology: algo.TopologySpec | None = None,
    rtts_ms: Mapping[str, float] | None = None,
    delta: float,
    bs_min_mib: float | None = None,
    bs_max_mib: float | None = None,
    generation: int | None = None,
    looked_up: bool = False,
    cache: AnswerCache = answers,
    objective: Objective | None = None,
    queue: QueueCampaign | None = None,
) -> SentAnswer:
    """The answer as sent (`render(row)` -> body, poll URL), committed.

    `generation`: the answer generation the caller read before anything else of this request
    (read here, first, when left out). `looked_up`: the caller already looked the question up
    in `cache` under that generation and missed (it is not looked up twice). `queue`: how a
    provisional answer queues its campaign (`recommend`'s).
    """
    if generation is None:
        generation = answer_generation.current(session)
    question = None
    if topology_id is not None:
        question = cache.question(database_of(session), topology_id, delta, bs_min_mib,
                                  bs_max_mib, (objective or Objective()).key())
        hit = None if looked_up else cache.answer(question, generation)
        if hit is not None:
            session.rollback()
            return SentAnswer(hit.content, source="cache")

    def answer():
        return recommend(
            session, topology_id=topology_id, topology=topology, rtts_ms=rtts_ms, delta=delta,
            bs_min_mib=bs_min_mib, bs_max_mib=bs_max_mib, settings=settings, reuse=True,
            objective=objective, queue=queue,
        )

    try:
        outcome = answer()
        session.commit()
    except IntegrityError:
        # Lost a race to a concurrent request (an inline site or topology, the topology's one
        # active campaign): after the rollback the winner's rows are visible and are reused.
        session.rollback()
        outcome = answer()
        session.commit()
    rec = outcome.recommendation or recommendations.get_recommendation(
        session, recommendation_id=outcome.recommendation_id
    )
    content, poll_url = render(rec)
    if question is not None and not outcome.provisional:
        cache.remember(question, generation,
                       Remembered(rec.id, content, outcome.stale_at))
    return SentAnswer(content, outcome.provisional, poll_url,
                      "provisional" if outcome.provisional else "solved")
