"""The OpenAPI document as the API behaves: every error an application/problem+json Problem,
`Location` on the 201s and 202s, `Retry-After` on the 202s, and which token scope each operation
needs (OpenAPI 3.1 lets a bearer scheme's requirement name roles: `read`, `write`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api import request_rules
from api.problems import MEDIA_TYPE

SCHEME = "HTTPBearer"  # the name FastAPI gives api.deps.bearer's scheme
OPEN_PATHS = {"/health"}
READ_METHODS = {"get", "head"}
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
LOCATION = {"description": "the URL of what was created or started (poll it)",
            "schema": {"type": "string"}}
RETRY_AFTER = {"description": "seconds to wait before polling the Location",
               "schema": {"type": "integer"}}


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def build(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(title=app.title, version=app.version, description=app.description,
                      routes=app.routes, tags=app.openapi_tags)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    from api.schemas import Problem

    schemas["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(schemas["Problem"].pop("$defs", {}))
    reads_open = not app.state.settings.reads_need_token
    components.setdefault("securitySchemes", {})[SCHEME] = {
        "type": "http", "scheme": "bearer",
        "description": "an API token from `mpcoa token create NAME [--scope read|write]`: "
        "`write` tokens may read and write, `read` tokens only read; each operation's "
        "security requirement names the scope it needs"
        + ("; reads are open on this server" if reads_open else ""),
    }
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            _problems(op)
            _headers(op)
            if path in OPEN_PATHS:
                op["security"] = []
            elif method in READ_METHODS:
                op["security"] = ([{}] if reads_open else []) + [{SCHEME: ["read"]}]
            else:
                op["security"] = [{SCHEME: ["write"]}]
                op.setdefault("responses", {}).setdefault(
                    "401", {"description": "no valid token"})
                op["responses"].setdefault("403", {"description": "a read token cannot write"})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    request_rules.tighten(schemas)
    # refresh every error's content now that 401/403 were added
    for operations in doc.get("paths", {}).values():
        for op in operations.values():
            _problems(op)
    return doc


def _problems(op: dict[str, Any]) -> None:
    for code, response in op.get("responses", {}).items():
        if code.isdigit() and int(code) >= 400:
            response["content"] = {MEDIA_TYPE: {"schema": PROBLEM_REF}}


def _headers(op: dict[str, Any]) -> None:
    for code, response in op.get("responses", {}).items():
        if code in ("201", "202"):
            headers = response.setdefault("headers", {})
            headers["Location"] = LOCATION
            if code == "202":
                headers["Retry-After"] = RETRY_AFTER
