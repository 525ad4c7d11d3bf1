"""The dashboard's and the docs' browser session: a login made with an API token.

Logging in stores a row (service.store.browser_sessions) and sets the cookie
`<session id>.<expiry>.<signature>`; the signature is an HMAC-SHA256, under the server's secret
(`Settings.session_secret`), of the session id, the expiry and the token's stored hash. So it
names a token without carrying it, and it dies with the token (revoking, expiring or replacing
the token ends every session made from it) and with its row: logging out deletes the row, so a
copied cookie stops working too. HttpOnly (no script reads it), SameSite=Strict (no other site's
page sends it) and Secure when the browser came over HTTPS (directly, or through a proxy named in
MPCOA_FORWARDED_ALLOW_IPS that says so in X-Forwarded-Proto); the login and logout POSTs also
check Origin. Cookies are only ever accepted for reads: writes need the Authorization header.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

from fastapi import Request, Response
from sqlalchemy.orm import Session

from models import ApiToken, BrowserSession, utcnow
from service.store import browser_sessions

COOKIE = "mpcoa_session"


def _sign(secret: bytes, session_id: str, expires: int, token_hash: str) -> str:
    mac = hmac.new(secret, f"{session_id}.{expires}.{token_hash}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def set_cookie(request: Request, response: Response, session: Session, row: ApiToken) -> None:
    """Open a login for the token `row` (the caller commits) and set its cookie."""
    settings = request.app.state.settings
    lifetime = int(settings.session_hours * 3600)
    expires = int(time.time()) + lifetime
    if row.expires_at is not None:  # a session never outlives its token
        expires = min(expires, int(row.expires_at.timestamp()))
    session_id = browser_sessions.open_session(
        session, token_id=row.id, expires_at=datetime.fromtimestamp(expires, UTC))
    signature = _sign(request.app.state.session_secret, session_id, expires, row.token_hash)
    response.set_cookie(
        COOKIE, f"{session_id}.{expires}.{signature}", max_age=max(0, expires - int(time.time())),
        path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https",
    )


def clear_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")


def _current(request: Request, session: Session) -> tuple[BrowserSession, ApiToken] | None:
    parts = request.cookies.get(COOKIE, "").split(".")
    if len(parts) != 3 or not parts[1].isdigit() or len(parts[1]) > 12:
        return None
    session_id, expires = parts[0], int(parts[1])
    if expires <= time.time():
        return None
    login = browser_sessions.live_session(session, session_id=session_id)
    if login is None:
        return None
    row = session.get(ApiToken, login.token_id)
    if row is None or row.revoked or (row.expires_at is not None and row.expires_at <= utcnow()):
        return None
    expected = _sign(request.app.state.session_secret, session_id, expires, row.token_hash)
    return (login, row) if hmac.compare_digest(expected, parts[2]) else None


def session_token(request: Request, session: Session) -> ApiToken | None:
    """The live token behind the request's session cookie, or None."""
    current = _current(request, session)
    return current[1] if current else None


def end_session(request: Request, session: Session) -> None:
    """Log out: the cookie's login, when it is a valid one, is deleted (the caller commits)."""
    current = _current(request, session)
    if current is not None:
        browser_sessions.close_session(session, session_id=current[0].id)


def same_origin(request: Request) -> bool:
    """A browser's POST carries Origin (or at least Referer): it must be this server. A request
    with neither is not a browser's, so not a cross-site forgery."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True
    parts = urlsplit(origin)
    return (parts.scheme, parts.netloc) == (request.url.scheme, request.url.netloc)


def safe_next(value: str | None, default: str) -> str:
    """Only a path on this server (no scheme, no //host): no open redirect."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value
