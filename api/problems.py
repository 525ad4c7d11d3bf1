"""Every error the API answers is an RFC 9457 problem document, `application/problem+json`, of
one shape: `type`, `title` (the status's phrase), `status`, `detail` (one sentence for a person),
and where they apply `loc` (the field at fault) and `errors` (a 422's every field with why).

`type` names the problem's section in docs/api.md ("Problem types"), one per status the API
answers: a URI reference relative to the repository's root, `docs/api.md#conflict`, so that a
client can branch on it and a person can read what it means and what to do. A status without a
section of its own (none the code gives today) keeps RFC 9457's default, `about:blank`."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from fastapi.responses import JSONResponse

MEDIA_TYPE = "application/problem+json"
DOCS = "docs/api.md"
BLANK = "about:blank"
# status -> the anchor of its section in docs/api.md (tests/api/test_problem_types.py)
SLUGS: dict[int, str] = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "content-too-large",
    422: "validation-error",
    500: "server-error",
    503: "service-unavailable",
}


def type_of(status: int) -> str:
    slug = SLUGS.get(status)
    return f"{DOCS}#{slug}" if slug else BLANK


def document(status: int, detail: str, **extensions: Any) -> dict[str, Any]:
    return {"type": type_of(status), "title": HTTPStatus(status).phrase, "status": status,
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
