"""API tokens: random, shown once, stored as SHA-256 (high-entropy tokens need no slow hash)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from models import TOKEN_SCOPES, ApiToken, utcnow

from ..errors import Conflict, Invalid, NotFound

TOKEN_PREFIX = "mpcoa_"  # noqa: S105 - a prefix, not a secret


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(
    session: Session, *, name: str, scope: str = "write", expires_at: datetime | None = None
) -> str:
    """Store a new token named `name` and return it; only its hash is kept. `scope` 'read'
    allows reads only; `expires_at` (optional) ends it."""
    if not name or len(name) > 64 or not name.isprintable() or name != name.strip():
        # a newline or tab in a name would forge a row of `mpcoa token list`'s table
        raise Invalid("a token's name is 1 to 64 printable characters (no line break or tab, "
                      "no space at either end)", ("name",))
    if scope not in TOKEN_SCOPES:
        raise Invalid(f"one of {TOKEN_SCOPES}", ("scope",))
    if session.scalar(select(ApiToken).where(ApiToken.name == name)) is not None:
        raise Conflict(f"a token named {name!r} exists", ("name",))
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(
        ApiToken(name=name, token_hash=hash_token(token), scope=scope, expires_at=expires_at)
    )
    session.flush()
    return token


_BY_HASH = None


def _by_hash():
    """Built once: constructing and cache-keying the statement per request costs more than it."""
    global _BY_HASH
    if _BY_HASH is None:
        _BY_HASH = select(ApiToken).where(ApiToken.token_hash == bindparam("digest"))
    return _BY_HASH


def verify_token(session: Session, *, token: str | None,
                 now: datetime | None = None) -> ApiToken | None:
    """The live token row matching `token` at `now` (default: the wall clock), or None (one
    indexed SELECT; SHA-256, no slow hash)."""
    if not token or len(token) > 200:
        return None
    digest = hash_token(token)
    row = session.scalar(_by_hash(), {"digest": digest})
    if row is None or row.revoked or not hmac.compare_digest(row.token_hash, digest):
        return None
    if row.expires_at is not None and row.expires_at <= (now or utcnow()):
        return None
    return row


def allows(row: ApiToken, scope: str) -> bool:
    """A 'write' token may read and write; a 'read' token only read."""
    return scope == "read" or row.scope == "write"


def list_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_token(session: Session, *, name: str) -> None:
    row = session.scalar(select(ApiToken).where(ApiToken.name == name))
    if row is None:
        raise NotFound(f"no token named {name!r}")
    row.revoked = True
