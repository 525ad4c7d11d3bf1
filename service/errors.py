"""Errors the service raises for the API (and the CLI) to turn into 404 / 409 / 422."""

from __future__ import annotations


class ServiceError(Exception):
    def __init__(self, message: str, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc


class NotFound(ServiceError):
    """An id that does not exist (404)."""


class Conflict(ServiceError):
    """The request contradicts what is stored (409)."""


class Invalid(ServiceError):
    """Input that passed the schema but not the domain rules (422); loc is the field's path."""
