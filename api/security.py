"""Small helpers shared by the token checks."""

from __future__ import annotations

from fastapi.security import HTTPAuthorizationCredentials


def bearer_credentials(token: str) -> HTTPAuthorizationCredentials | None:
    """A token typed into a form, as the Authorization header would have carried it."""
    return HTTPAuthorizationCredentials(scheme="Bearer", credentials=token) if token else None
