"""Issue 14, items 4 and 8: bodies are capped and never parsed before the token check; malformed
JSON is 400; a 422 does not echo the input; a database outage is 503 JSON; server faults are not
422."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.middleware import WRITE_METHODS
from service.settings import Settings

from .conftest import HU, SRL

pytestmark = pytest.mark.postgres
NOT_JSON = b'{"name": "SRL", "isps": ['


def _write_routes(app) -> list[tuple[str, str]]:
    out = []
    for path, operations in app.openapi()["paths"].items():
        for method in operations:
            if method.upper() in WRITE_METHODS:
                concrete = "/".join("1" if p.startswith("{") else p for p in path.split("/"))
                out.append((method.upper(), concrete))
    return out


def test_every_write_is_401_without_a_token_before_its_body_is_parsed(client, app):
    routes = _write_routes(app)
    assert ("POST", "/recommendations") in routes and ("PUT", "/sites/1") in routes
    for method, path in routes:
        if path.startswith("/dashboard/log"):
            continue
        for headers in ({}, {"Authorization": "Bearer mpcoa_not-a-token"}):
            r = client.request(method, path, content=NOT_JSON,
                               headers={**headers, "content-type": "application/json"})
            assert r.status_code == 401, (method, path, r.status_code, r.text)
            assert r.headers["www-authenticate"] == "Bearer"


def test_malformed_json_is_400_with_a_json_body(client, auth):
    for path in ("/sites", "/recommendations", "/campaigns"):
        r = client.post(path, content=NOT_JSON,
                        headers={**auth, "content-type": "application/json"})
        assert r.status_code == 400, (path, r.text)
        assert r.json()["detail"] == "the body is not valid JSON"


def test_a_body_over_the_cap_is_413_by_length_and_when_streamed(client, auth, settings):
    cap = settings.max_body_bytes
    big = json.dumps({**SRL, "description": "x" * cap}).encode()
    r = client.post("/sites", content=big, headers={**auth, "content-type": "application/json"})
    assert r.status_code == 413 and "larger than" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit must count what arrives
        for k in range(0, len(big), 65536):
            yield big[k:k + 65536]

    r = client.post("/sites", content=chunks(),
                    headers={**auth, "content-type": "application/json"})
    assert r.status_code == 413, r.text
    assert "larger than" in r.json()["detail"]
    # Without a token the answer is 401 whatever the size.
    r = client.post("/sites", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 401
    assert client.post("/sites", json=SRL, headers=auth).status_code == 201


def test_a_422_names_the_field_without_echoing_the_input(client, auth):
    isp = {"name": "I", "label": "I", "down_kbps": 1, "up_kbps": 1}
    body = {**HU, "isps": [isp] * 5000}  # ~300 kB: under the cap, far over the 16 ISPs allowed
    r = client.post("/sites", json=body, headers=auth)
    assert r.status_code == 422
    assert len(r.content) < 2000 and "input" not in r.json()["errors"][0]
    assert r.json()["errors"][0]["loc"] == ["body", "isps"]


def test_request_lists_and_maps_are_bounded(app):
    """Every array and object of a request body has a size bound in the schema."""
    schema = app.openapi()
    unbounded = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("type") == "array" and "maxItems" not in node:
                unbounded.append(where)
            if (node.get("type") == "object" and "additionalProperties" in node
                    and node["additionalProperties"] not in (False,)
                    and "maxProperties" not in node):
                unbounded.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for k, value in enumerate(node):
                walk(value, f"{where}/{k}")

    for name, component in schema["components"]["schemas"].items():
        if name.endswith(("In", "Patch", "Parameters", "Topology", "Site", "ISP")):
            walk(component, name)
    assert unbounded == []


# --- item 8 ---------------------------------------------------------------------------------------
@pytest.fixture
def outage_client(tmp_path):
    # Nothing listens on port 1: every connection attempt is refused, like a stopped PostgreSQL.
    settings = Settings(database_url="postgresql+psycopg://mpcoa@127.0.0.1:1/mpcoa",
                        data_dir=tmp_path, run_campaigns=False, _env_file=None)
    with TestClient(create_app(settings), raise_server_exceptions=False,
                    base_url="http://localhost") as client:
        yield client


def test_a_database_outage_is_503_json_with_retry_after(outage_client):
    for method, path, body in (("GET", "/health", None), ("GET", "/sites", None),
                               ("POST", "/sites", SRL), ("POST", "/recommendations",
                                                         {"topology_id": 1})):
        r = outage_client.request(method, path, json=body,
                                  headers={"Authorization": "Bearer mpcoa_x"})
        assert r.status_code == 503, (path, r.status_code, r.text)
        assert r.headers["retry-after"].isdigit()
        assert r.json()["detail"].startswith("the database is unavailable")


def test_server_faults_are_not_422(client, app):
    r = client.get("/dashboard/static/%00")
    assert r.status_code == 404
    r = client.get("/dashboard/static/..%2f..%2fapi%2fapp.py")
    assert r.status_code == 404

    @app.get("/_boom")
    def boom():
        raise ValueError("a bug, not the client's input")

    r = client.get("/_boom")
    assert r.status_code == 500 and r.json() == {
        "type": "docs/api.md#server-error", "title": "Internal Server Error", "status": 500,
        "detail": "internal server error"}
    assert r.headers["content-type"] == "application/problem+json"
