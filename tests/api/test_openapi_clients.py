"""What a client generator reads in the published OpenAPI document: an operationId per operation
that reads as a method's name, an example on every request body and success response (each one
valid against its own schema), and a 405 with `Allow` listing every method of the path, before
any token check, for a method the path does not have."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from jsonschema_rs import Draft202012Validator  # schemathesis's own validator

from api.app import create_app
from service.settings import Settings

PROBLEM = "application/problem+json"
# bodies no JSON example can show: a .tar.gz, a Parquet file, a tool's raw file of any type
BINARY = {"application/gzip", "application/vnd.apache.parquet"}
RAW_FILE = {"downloadArtifact"}
METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clients")
    app = create_app(Settings(database_url=f"sqlite:///{folder / 'api.sqlite3'}",
                              data_dir=folder, run_campaigns=False, _env_file=None))
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def doc(client):
    r = client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def _operations(doc):
    return [(path, method, op) for path, ops in doc["paths"].items()
            for method, op in ops.items() if method in METHODS]


def test_operation_ids_read_as_method_names(doc):
    ids = [op["operationId"] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids)) > 30
    for operation_id in ids:
        assert re.fullmatch(r"[a-z]+(?:[A-Z][a-z0-9]*)*", operation_id), operation_id
    by_route = {(m, p): op["operationId"] for p, m, op in _operations(doc)}
    assert by_route["post", "/recommendations"] == "createRecommendation"
    assert by_route["get", "/topologies/{topology_id}/fits"] == "getFits"
    assert by_route["get", "/health"] == "getHealth"
    # no generated names left in the document either (FastAPI names inline bodies after them)
    assert not any(name.startswith(("Body_", "Response_"))
                   for name in doc["components"]["schemas"])


def _check(doc, schema, example, where):
    validator = Draft202012Validator({**schema, "components": doc["components"]},
                                     validate_formats=True)
    errors = [e.message for e in validator.iter_errors(example)]
    assert not errors, (where, errors[:3])


def _examples_of(entry) -> list:
    if "example" in entry:
        return [entry["example"]]
    return [e["value"] for e in entry.get("examples", {}).values()]


def test_every_request_body_and_success_response_has_a_valid_example(doc):
    checked = 0
    for path, method, op in _operations(doc):
        where = f"{method.upper()} {path}"
        bodies = op.get("requestBody", {}).get("content", {})
        successes = {code: r for code, r in op["responses"].items() if code.startswith("2")}
        assert successes, where
        contents = [("request", bodies)] + [(code, r.get("content", {}))
                                           for code, r in successes.items()]
        for what, content in contents:
            if what == "204" or (what != "request" and op["operationId"] in RAW_FILE):
                assert not content, where
                continue
            if what != "request":
                assert content, f"{where} {what}: no content declared"
            for media, entry in content.items():
                if media in BINARY:
                    continue
                examples = _examples_of(entry)
                assert examples, f"{where} {what} {media}: no example"
                for example in examples:
                    if "schema" in entry:
                        _check(doc, entry["schema"], example, (where, what, media))
                    checked += 1
    assert checked > 40
    for name, schema in doc["components"]["schemas"].items():  # also as components
        for example in schema.get("examples", []):
            _check(doc, {"$ref": f"#/components/schemas/{name}"}, example, name)


def _allowed(r) -> set[str]:
    return {m.strip() for m in r.headers["allow"].split(",")}


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("OPTIONS", "/sites", {"GET", "POST"}),
    ("DELETE", "/sites", {"GET", "POST"}),
    ("PUT", "/health", {"GET"}),
    ("POST", "/sites/1", {"GET", "PUT", "DELETE"}),
    ("PATCH", "/topologies/1/schedule", {"GET", "PUT", "DELETE"}),
    ("GET", "/topologies/1/apply", {"POST"}),
    ("OPTIONS", "/campaigns/7/cancel", {"POST"}),
])
def test_a_wrong_method_is_405_with_every_method_of_the_path(client, doc, method, path, allow):
    r = client.request(method, path)  # no token: the method is wrong whoever asks
    assert r.status_code == 405, r.text
    assert r.headers["content-type"] == PROBLEM
    assert _allowed(r) == allow
    problem = r.json()
    assert problem["type"] == "docs/api.md#method-not-allowed" and problem["status"] == 405
    assert method in problem["detail"]
    template = re.sub(r"/\d+", lambda m: "/{}", path)
    documented = next(ops for p, ops in doc["paths"].items()
                      if re.sub(r"\{[^}]+\}", "{}", p) == template)
    assert {m.upper() for m in documented} == allow  # the same as the document says


def test_the_right_methods_and_other_paths_pass_the_gate(client):
    assert client.get("/health").status_code == 200
    assert client.get("/no/such/path").status_code == 404
    assert client.post("/sites", json={}).status_code == 401  # the token gate's turn
    assert client.put("/sites/1", json={}).status_code == 401
    assert client.get("/openapi.json").status_code == 200
