"""The one cache of answers, kept correct by invalidation rather than by a time to live.

A calibrated answer to a question by topology id -- (database, topology, delta, bounds,
objective) -- is
remembered with the answer generation (`store.answer_generation`) it was computed under and is
valid while the generation is unchanged: anything that can change the answer (a PATCHed topology
or site, a new calibration, a revoked or re-scoped token) raises the generation in the database,
in the writer's own transaction, whichever process made it. Every process reads the generation
before it uses an entry, so no process ever serves an answer older than the last committed
change. Two things change with the clock alone and are checked on every use: an answer's data
turns stale `STALE_AFTER_S` after its newest measurement (the answer then carries "stale_data":
one remembered before that is not used after it; a stale one is remembered like any other, as
the clock cannot change it again), a token expires.

A token found live is remembered the same way (per generation, with its expiry), so a repeated
question costs a dictionary lookup, not a token query; once a minute the full check runs again to
keep `last_used_at` current.

Reading the generation per request is cheap, and cheaper still shared: `GenerationReader`
coalesces concurrent requests of one process onto one read that *started after* each of them
arrived, which keeps the guarantee above (read-your-writes across processes) at a fraction of
the reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta

from models import utcnow

from ...cache import LRU

STALE_AFTER_S = 30 * 24 * 3600  # data older than this is flagged "stale_data"
TOKEN_TOUCH_S = 60  # `last_used_at` is kept this current (api.deps.check_token)


@dataclass(frozen=True)
class Remembered:
    """A stored calibrated answer, as sent."""

    recommendation_id: int
    content: bytes
    stale_at: datetime | None  # its data turns stale then: the answer changes (None: never)


@dataclass(frozen=True)
class LiveToken:
    scope: str
    expires_at: datetime | None
    last_used_at: datetime | None


class AnswerCache:
    """`clock`: what "now" is when a remembered answer turns stale and a token expires (the
    request's own token check reads it too); the wall clock unless a test sets it."""

    def __init__(self, size: int = 4096, clock: Callable[[], datetime] = utcnow) -> None:
        self._answers: LRU[tuple[int, Remembered]] = LRU(size)
        self._tokens: LRU[tuple[int, LiveToken]] = LRU(size)
        self.clock = clock

    @staticmethod
    def question(database: str, topology_id: int, delta: float, bs_min, bs_max,
                 objective: str = "bulk") -> tuple:
        """`objective`: `Objective.key()`, so that answers for different objectives never mix."""
        return (database, topology_id, delta, bs_min, bs_max, objective)

    def answer(self, question: Hashable, generation: int) -> Remembered | None:
        entry = self._answers.get(question)
        if entry is None or entry[0] != generation:
            return None
        remembered = entry[1]
        if remembered.stale_at is not None and self.clock() >= remembered.stale_at:
            return None
        return remembered

    def remember(self, question: Hashable, generation: int, remembered: Remembered) -> None:
        self._answers.put(question, (generation, remembered))

    def token(self, database: str, digest: str, generation: int, scope: str) -> bool:
        """The token is known live for `scope` under this generation (and not due a touch)."""
        entry = self._tokens.get((database, digest))
        if entry is None or entry[0] != generation:
            return False
        token, now = entry[1], self.clock()
        if token.expires_at is not None and token.expires_at <= now:
            return False
        if token.last_used_at is None or now - token.last_used_at > timedelta(
            seconds=TOKEN_TOUCH_S
        ):
            return False
        return scope == "read" or token.scope == "write"

    def remember_token(self, database: str, digest: str, generation: int, row) -> None:
        self._tokens.put(
            (database, digest),
            (generation, LiveToken(row.scope, row.expires_at, row.last_used_at)),
        )

    def clear(self) -> None:
        """Forget everything (as a freshly started process would)."""
        self._answers.clear()
        self._tokens.clear()


answers = AnswerCache()


def stale_at(newest_at: datetime | None) -> datetime | None:
    return newest_at + timedelta(seconds=STALE_AFTER_S) if newest_at is not None else None


class GenerationReader:
    """Reads of the generation for one process and database, shared by the requests waiting.

    `fresh()` returns a value read by a query that started after the call: a request joins the
    read that is about to start, or, while one is in flight, the next one (which starts when the
    current one ends). `read` runs the query (in a worker thread: it blocks).
    """

    def __init__(self, read: Callable[[], Awaitable[int]]) -> None:
        self._read = read
        self._in_flight: asyncio.Future | None = None
        self._next: asyncio.Future | None = None

    async def fresh(self) -> int:
        if self._next is None:
            self._next = asyncio.ensure_future(self._after(self._in_flight))
        return await asyncio.shield(self._next)

    async def _after(self, previous: asyncio.Future | None) -> int:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        # From here on newcomers wait for the read after this one: this one may have begun.
        self._in_flight, self._next = self._next, None
        return await self._read()
