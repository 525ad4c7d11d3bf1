"""The dashboard's and the docs' browser session: a signed cookie made from an API token.

The cookie is `<token id>.<expiry>.<signature>`; the signature is an HMAC-SHA256, under the
server's secret (`Settings.session_secret`), of the id, the expiry and the token's stored hash.
So it names a token without carrying it, and it dies with the token: revoking, expiring or
replacing the token ends every session made from it. HttpOnly (no script reads it) and
SameSite=Strict (no other site's page sends it); the login and logout POSTs also check Origin.
Cookies are only ever accepted for reads: writes need the Authorization header.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from urllib.parse import urlsplit

from fastapi import Request, Response
from sqlalchemy.orm import Session

from models import ApiToken, utcnow

COOKIE = "mpcoa_session"


def _sign(secret: bytes, token_id: int, expires: int, token_hash: str) -> str:
    mac = hmac.new(secret, f"{token_id}.{expires}.{token_hash}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def set_cookie(request: Request, response: Response, row: ApiToken) -> None:
    settings = request.app.state.settings
    lifetime = int(settings.session_hours * 3600)
    expires = int(time.time()) + lifetime
    if row.expires_at is not None:  # a session never outlives its token
        expires = min(expires, int(row.expires_at.timestamp()))
    signature = _sign(request.app.state.session_secret, row.id, expires, row.token_hash)
    value = f"{row.id}.{expires}.{signature}"
    response.set_cookie(
        COOKIE, value, max_age=max(0, expires - int(time.time())), path="/", httponly=True,
        samesite="strict", secure=request.url.scheme == "https",
    )


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")


def session_token(request: Request, session: Session) -> ApiToken | None:
    """The live token behind the request's session cookie, or None."""
    parts = request.cookies.get(COOKIE, "").split(".")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    token_id, expires = int(parts[0]), int(parts[1])
    if expires <= time.time() or not 1 <= token_id <= 2**31 - 1:
        return None
    row = session.get(ApiToken, token_id)
    if row is None or row.revoked or (row.expires_at is not None and row.expires_at <= utcnow()):
        return None
    expected = _sign(request.app.state.session_secret, row.id, expires, row.token_hash)
    return row if hmac.compare_digest(expected, parts[2]) else None


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
