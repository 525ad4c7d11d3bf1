"""Dashboard logins (api.session): one row per login, named by a random id in the cookie.
Logging out deletes the row, so the cookie, and every copy of it, stops working. Flush, never
commit."""

from __future__ import annotations

import re
import secrets
from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from models import BrowserSession, utcnow

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{32}")


def open_session(session: Session, *, token_id: int, expires_at: datetime) -> str:
    """A new login for the token; returns its id. Logins that ran out go first."""
    session.execute(delete(BrowserSession).where(BrowserSession.expires_at <= utcnow()))
    session_id = secrets.token_urlsafe(24)  # 32 characters
    session.add(BrowserSession(id=session_id, token_id=token_id, expires_at=expires_at))
    session.flush()
    return session_id


def live_session(session: Session, *, session_id: str) -> BrowserSession | None:
    """The login `session_id` names while it lasts, or None."""
    if not SESSION_ID.fullmatch(session_id):
        return None
    row = session.get(BrowserSession, session_id)
    return row if row is not None and row.expires_at > utcnow() else None


def close_session(session: Session, *, session_id: str) -> None:
    session.execute(delete(BrowserSession).where(BrowserSession.id == session_id))
    session.flush()
