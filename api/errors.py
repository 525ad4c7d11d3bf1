"""Exception handlers: every error the API gives is an RFC 9457 problem document (api.problems)
with the status that says whose fault it is: a lost race is a 409, a database outage a 503, a
server fault a 500 (never 422), so that a client can tell what to retry."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from api.deps import LoginRequired
from api.problems import ProblemResponse, problem
from service.errors import Conflict, Invalid, NotFound, ServiceError

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
# A 422 names the field and why; it never echoes the input (a 9.3 MB list came back in one).
MAX_ERRORS = 20


def _where(loc) -> str:
    return ".".join(str(p) for p in loc)


def service_error(_request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, ServiceError)
    if isinstance(exc, NotFound):
        return problem(404, exc.message)
    if isinstance(exc, Conflict):
        return problem(409, exc.message, loc=list(exc.loc))
    loc = list(exc.loc) or ["body"]
    return problem(422, f"{_where(loc)}: {exc.message}", loc=loc,
                   errors=[{"loc": loc, "msg": exc.message, "type": "value_error"}])


def integrity_error(_request: Request, exc: Exception) -> ProblemResponse:
    """A unique key (or the one-active-campaign index) lost a race at flush or commit: 409.
    The request's session is rolled back by its dependency."""
    log.info("integrity error mapped to 409: %s", getattr(exc, "orig", exc))
    return problem(
        409, "the change conflicts with stored data (a concurrent request made it first)",
        loc=[])


def database_unavailable(_request: Request, exc: Exception) -> ProblemResponse:
    """The database cannot be reached (refused, dropped, pool exhausted): the client may retry."""
    log.warning("database unavailable: %s", exc.__class__.__name__)
    return problem(503, "the database is unavailable; retry later",
                   headers={"Retry-After": str(RETRY_AFTER_S)})


def dbapi_error(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, DBAPIError)
    if exc.connection_invalidated:
        return database_unavailable(request, exc)
    return server_error(request, exc)


def server_error(_request: Request, exc: Exception) -> ProblemResponse:
    log.error("unhandled error", exc_info=exc)
    return problem(500, "internal server error")


def http_error(_request: Request, exc: Exception) -> ProblemResponse:
    """401, 403, 413, an unknown path (404) or method (405): the same problem shape."""
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return problem(exc.status_code, detail, headers=getattr(exc, "headers", None))


def validation_error(_request: Request, exc: Exception) -> ProblemResponse:
    """Malformed JSON is 400 (docs/api.md); a body that parses but does not fit is 422, every
    field at fault in `errors`, the first in `detail` and `loc`."""
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return problem(400, "the body is not valid JSON", loc=["body"])
    listed = [
        {k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors[:MAX_ERRORS]
    ]
    first = listed[0] if listed else {"loc": [], "msg": "invalid request"}
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return problem(422, f"{_where(first['loc'])}: {first['msg']}{more}",
                   loc=list(first["loc"]), errors=listed)


def login_required(request: Request, _exc: Exception) -> RedirectResponse:
    """A dashboard or docs page without a session: to the login form, and back afterwards."""
    root = request.scope.get("root_path", "").rstrip("/")
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{root}/dashboard/login?{urlencode({'next': target})}", 303)


def install(app: FastAPI) -> None:
    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(Invalid, service_error)
    app.add_exception_handler(IntegrityError, integrity_error)
    app.add_exception_handler(OperationalError, database_unavailable)
    app.add_exception_handler(PoolTimeout, database_unavailable)
    app.add_exception_handler(DBAPIError, dbapi_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, server_error)
