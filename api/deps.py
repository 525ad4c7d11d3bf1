"""Per-request dependencies: the database session and the token checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from typing import Annotated

import anyio
from fastapi import Depends, HTTPException, Query, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api import session as browser_session
from models import ApiToken, utcnow
from service.errors import Conflict
from service.store import tokens

bearer = HTTPBearer(auto_error=False, description="an API token from `mpcoa token create NAME`")


def get_session(request: Request) -> Iterator[Session]:
    session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def commit(session: Session) -> None:
    """Commit, turning a unique-key race into 409."""
    try:
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise Conflict("the change conflicts with stored data") from exc


def check_token(
    session: Session, credentials: HTTPAuthorizationCredentials | None, *, scope: str,
    now: datetime | None = None,
) -> ApiToken:
    """The live token of the request at `now` (default: the wall clock): 401 without one
    (missing, unknown, revoked, expired), 403 when its scope does not allow `scope` ('read'
    tokens cannot write)."""
    now = now or utcnow()
    row = tokens.verify_token(session, token=credentials.credentials if credentials else None,
                              now=now)
    if row is None:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="a valid API token is needed (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not tokens.allows(row, scope):
        raise HTTPException(
            status_code=status.HTTP_403_FORBIDDEN,
            detail=f"this token's scope is {row.scope!r}; {scope!r} is needed",
        )
    if row.last_used_at is None or now - row.last_used_at > timedelta(minutes=1):
        row.last_used_at = now
        session.commit()
    return row


def require_write(session: SessionDep, credentials: Credentials) -> None:
    check_token(session, credentials, scope="write")


# Hot-path writes run their blocking DB work in a few threads of their own instead of the default
# 40-thread pool: under load 40 threads contending for the GIL cost ~1 ms of CPU per request
# (measured, benchmarks/api_load.py). Two lanes, so that a token check waiting for a pooled
# connection can never hold the slot the request that owns a connection needs to finish.
_LANE_THREADS = 2
_lanes: dict[str, anyio.CapacityLimiter] = {}


async def in_lane(lane: str, fn, *args):
    """Run `fn(*args)` in a worker thread of `lane` ("auth" or "work")."""
    limiter = _lanes.get(lane)
    if limiter is None:
        limiter = _lanes[lane] = anyio.CapacityLimiter(_LANE_THREADS)
    return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)


async def lane_session(request: Request) -> AsyncIterator[Session]:
    """A session for an async endpoint that checks the token itself inside its one thread hop
    (`check_token` first thing); api.middleware.WriteGate has already turned away writes without
    a live token before their body was read."""
    session = request.app.state.session_factory()
    try:
        yield session
    finally:
        if session.in_transaction():
            await in_lane("work", session.rollback)
        session.close()


LaneSession = Annotated[Session, Depends(lane_session)]


def require_read(request: Request, credentials: Credentials) -> None:
    """Reads are open unless `reads_need_token`; then a token (any scope) in the Authorization
    header, or the browser session cookie of the dashboard's login. A session of its own, opened
    only when needed (open reads, /openapi.json included, touch no database for it)."""
    if not request.app.state.settings.reads_need_token:
        return
    with request.app.state.session_factory() as session:
        if credentials is None and browser_session.session_token(request, session) is not None:
            return
        check_token(session, credentials, scope="read")


class LoginRequired(Exception):
    """A page (dashboard, docs) asked for without a session: the browser goes to the login."""


def require_read_page(request: Request, credentials: Credentials) -> None:
    try:
        require_read(request, credentials)
    except HTTPException as exc:
        if exc.status_code == status.HTTP_401_UNAUTHORIZED:
            raise LoginRequired from exc
        raise


Limit = Annotated[int, Query(ge=1, le=500, description="page size")]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1, description="items to skip")]
