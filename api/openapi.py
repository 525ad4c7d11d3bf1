"""The OpenAPI document as the API behaves: every error an application/problem+json Problem,
`Location` on the 201s and 202s, `Retry-After` on the 202s, which token scope each operation
needs (OpenAPI 3.1 lets a bearer scheme's requirement name roles: `read`, `write`), operationIds
a generated client can call by name, and an example on every request body and success response
(api.examples)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from api import request_rules
from api.examples import EXAMPLES, MEDIA_EXAMPLES, OPERATION_EXAMPLES
from api.problems import MEDIA_TYPE

SCHEME = "HTTPBearer"  # the name FastAPI gives api.deps.bearer's scheme
OPEN_PATHS = {"/health"}
READ_METHODS = {"get", "head"}
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
LOCATION = {"description": "the URL of what was created or started (poll it)",
            "schema": {"type": "string"}}
RETRY_AFTER = {"description": "seconds to wait before polling the Location",
               "schema": {"type": "integer"}}


def operation_id(route: APIRoute) -> str:
    """The route function's name in camelCase (`create_recommendation` -> `createRecommendation`):
    what a generated client calls the method, stable while the function keeps its name; the
    functions' names are unique among the documented routes (`build` checks)."""
    head, *rest = route.name.split("_")
    return head + "".join(word.capitalize() for word in rest)


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
    ids = [op["operationId"] for ops in doc.get("paths", {}).values() for op in ops.values()]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"two operations share an operationId: {duplicates}"
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    request_rules.tighten(schemas)
    for name, example in EXAMPLES.items():
        if name in schemas:
            schemas[name].setdefault("examples", [example])
    for operations in doc.get("paths", {}).values():
        for op in operations.values():
            _examples(op, schemas)
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


def _example_of(schema: dict[str, Any], schemas: dict[str, Any]) -> Any:
    """An example of `schema`: its component's, a page's or a list's built from its item's,
    the non-null branch of an optional body; None when there is none."""
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[1]
        if name.startswith("Page_") and name.endswith("_"):
            item = _example_of({"$ref": f"#/components/schemas/{name[5:-1]}"}, schemas)
            return None if item is None else {"items": [item], "total": 1, "limit": 50,
                                               "offset": 0}
        listed = schemas.get(name, {}).get("examples")
        return listed[0] if listed else None
    if schema.get("type") == "array" and "items" in schema:
        item = _example_of(schema["items"], schemas)
        return None if item is None else [item]
    for branch in schema.get("anyOf", []):
        if branch.get("type") != "null":
            return _example_of(branch, schemas)
    return None


def _examples(op: dict[str, Any], schemas: dict[str, Any]) -> None:
    contents = [("request", op.get("requestBody", {}).get("content", {}))]
    contents += [(code, r.get("content", {})) for code, r in op.get("responses", {}).items()
                 if code.startswith("2")]
    for code, content in contents:
        for media, entry in content.items():
            if "example" in entry or "examples" in entry:
                continue
            example = OPERATION_EXAMPLES.get((op["operationId"], code))
            if example is None:
                example = (MEDIA_EXAMPLES.get(media) if "schema" not in entry
                           else _example_of(entry["schema"], schemas))
            if example is not None:
                entry["example"] = example
