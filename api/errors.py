"""Exception handlers: every error the API gives is JSON with the status that says whose fault it
is: a lost race is a 409, a database outage a JSON 503, a server fault a 500 (never 422), so that
a client can tell what to retry."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from api.deps import LoginRequired
from service.errors import Conflict, Invalid, NotFound, ServiceError

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
# A 422 names the field and why; it never echoes the input (a 9.3 MB list came back in one).
MAX_ERRORS = 20


def service_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    if isinstance(exc, NotFound):
        return JSONResponse({"detail": exc.message}, status_code=404)
    if isinstance(exc, Conflict):
        return JSONResponse({"detail": exc.message, "loc": list(exc.loc)}, status_code=409)
    loc = list(exc.loc) or ["body"]
    body = {"detail": [{"loc": loc, "msg": exc.message, "type": "value_error"}]}
    return JSONResponse(body, status_code=422)


def integrity_error(_request: Request, exc: Exception) -> JSONResponse:
    """A unique key (or the one-active-campaign index) lost a race at flush or commit: 409.
    The request's session is rolled back by its dependency."""
    log.info("integrity error mapped to 409: %s", getattr(exc, "orig", exc))
    return JSONResponse(
        {"detail": "the change conflicts with stored data (a concurrent request made it first)",
         "loc": []},
        status_code=409,
    )


def database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    """The database cannot be reached (refused, dropped, pool exhausted): the client may retry."""
    log.warning("database unavailable: %s", exc.__class__.__name__)
    return JSONResponse(
        {"detail": "the database is unavailable; retry later"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def dbapi_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DBAPIError)
    if exc.connection_invalidated:
        return database_unavailable(request, exc)
    return server_error(request, exc)


def server_error(_request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error", exc_info=exc)
    return JSONResponse({"detail": "internal server error"}, status_code=500)


def validation_error(_request: Request, exc: Exception) -> JSONResponse:
    """Malformed JSON is 400 (docs/api.md); a body that parses but does not fit is 422."""
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return JSONResponse({"detail": "the body is not valid JSON", "loc": ["body"]}, 400)
    detail = [
        {k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors[:MAX_ERRORS]
    ]
    return JSONResponse({"detail": detail}, status_code=422)


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
    app.add_exception_handler(Exception, server_error)
