"""Every error the API answers is an RFC 9457 problem document, `application/problem+json`, of
one shape: `type`, `title` (the status's phrase), `status`, `detail` (one sentence for a person),
and where they apply `loc` (the field at fault) and `errors` (a 422's every field with why)."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from fastapi.responses import JSONResponse

MEDIA_TYPE = "application/problem+json"
# No problem type of ours needs more than its status says: RFC 9457's default type.
TYPE = "about:blank"


def document(status: int, detail: str, **extensions: Any) -> dict[str, Any]:
    return {"type": TYPE, "title": HTTPStatus(status).phrase, "status": status,
            "detail": detail, **{k: v for k, v in extensions.items() if v is not None}}


class ProblemResponse(JSONResponse):
    media_type = MEDIA_TYPE


def problem(status: int, detail: str, *, headers: dict[str, str] | None = None,
            **extensions: Any) -> ProblemResponse:
    return ProblemResponse(document(status, detail, **extensions), status_code=status,
                           headers=headers)


def encoded(status: int, detail: str) -> bytes:
    """The document as bytes, for the ASGI middlewares that answer before FastAPI."""
    return json.dumps(document(status, detail)).encode()
