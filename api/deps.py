"""Per-request dependencies: the database session and the token checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service import tokens
from service.errors import Conflict
from service.settings import Settings

bearer = HTTPBearer(auto_error=False, description="an API token from `mpcoa token create NAME`")


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


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


def _check(session: Session, credentials: HTTPAuthorizationCredentials | None) -> None:
    row = tokens.verify_token(session, credentials.credentials if credentials else None)
    if row is None:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="a valid API token is needed (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    now = tokens.utcnow()
    if row.last_used_at is None or now - row.last_used_at > timedelta(minutes=1):
        row.last_used_at = now
        session.commit()


def require_write(session: SessionDep, credentials: Credentials) -> None:
    _check(session, credentials)


async def write_session(request: Request, credentials: Credentials) -> AsyncIterator[Session]:
    """A session whose token check has passed, for async write endpoints on the hot path.

    The check (one indexed SELECT; an UPDATE and a commit at most once a minute) runs in the
    threadpool: a pool checkout must never block the event loop. Like `require_write` it runs
    before the body is validated, so a bad token is 401 whatever the body. Closing the session
    on the loop is cheap (returning an idle connection to the pool sends nothing).
    """
    session = request.app.state.session_factory()
    try:
        if _os.environ.get("MPCOA_ONEHOP"):
            if credentials is None:
                raise HTTPException(status_code=401)
            session.info["credentials"] = credentials
        else:
            await _run(_check, session, credentials)
        yield session
    finally:
        if session.in_transaction():
            await _run(session.rollback)
        session.close()


WriteSession = Annotated[Session, Depends(write_session)]


def require_read(request: Request, session: SessionDep, credentials: Credentials) -> None:
    if request.app.state.settings.reads_need_token:
        _check(session, credentials)


Limit = Annotated[int, Query(ge=1, le=500, description="page size")]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1, description="items to skip")]


import os as _os  # noqa: E402

if _os.environ.get("MPCOA_INLINE"):
    async def _run(fn, *args):
        return fn(*args)
else:
    _run = run_in_threadpool
