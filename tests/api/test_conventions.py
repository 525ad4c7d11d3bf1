"""The API's conventions: every error an RFC 9457 problem document of one shape, `Location` and
`Retry-After` on the 202s, the token scopes in the OpenAPI document, and an apply and its
rollback as resources with URLs of their own."""

from __future__ import annotations

from api import problems
from service.store import applied, tokens

from .conftest import HU, SRL

PROBLEM = "application/problem+json"


def _problem(r, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM, r.headers
    doc = r.json()
    assert doc["type"] == problems.type_of(status) and doc["status"] == status
    assert doc["type"].startswith("docs/api.md#")
    assert isinstance(doc["title"], str) and doc["title"]
    assert isinstance(doc["detail"], str) and doc["detail"]
    return doc


def _topology(client, auth) -> int:
    a = client.post("/sites", json=SRL, headers=auth).json()["id"]
    b = client.post("/sites", json=HU, headers=auth).json()["id"]
    r = client.post("/topologies", json={"local_site_id": a, "remote_site_id": b}, headers=auth)
    assert r.status_code == 201 and r.headers["location"] == f"/topologies/{r.json()['id']}"
    return r.json()["id"]


def test_every_error_is_one_problem_shape(client, auth, db_session):
    assert _problem(client.get("/campaigns/999999"), 404)["detail"] == "campaign 999999 not found"
    assert _problem(client.get("/no/such/path"), 404)["title"] == "Not Found"
    _problem(client.delete("/health", headers=auth), 405)
    unauthorised = client.post("/sites", json=SRL)
    assert _problem(unauthorised, 401)["detail"].startswith("a valid API token is needed")
    assert unauthorised.headers["www-authenticate"] == "Bearer"
    reader = tokens.create_token(db_session, name="reader", scope="read")
    db_session.commit()
    assert "scope" in _problem(client.post("/sites", json=SRL, headers={
        "Authorization": f"Bearer {reader}"}), 403)["detail"]

    bad_json = _problem(client.post("/sites", content=b"{nope", headers={
        **auth, "content-type": "application/json"}), 400)
    assert bad_json["loc"] == ["body"]
    invalid = _problem(client.post("/sites", json={"name": "X", "isps": [
        {"name": "a", "label": "A", "down_kbps": -1, "up_kbps": 1}], "colour": 1},
        headers=auth), 422)
    assert {tuple(e["loc"][:2]) for e in invalid["errors"]} == {("body", "isps"),
                                                                ("body", "colour")}
    assert invalid["loc"] == invalid["errors"][0]["loc"] and len(invalid["errors"]) == 2
    assert invalid["detail"].startswith(".".join(map(str, invalid["loc"])) + ": ")
    assert "(and 1 more)" in invalid["detail"]

    assert client.post("/sites", json=SRL, headers=auth).status_code == 201
    conflict = _problem(client.post("/sites", json=SRL, headers=auth), 409)
    assert conflict["detail"] == "a site named 'SRL' exists" and conflict["loc"] == ["body", "name"]
    domain = _problem(client.post("/recommendations", json={"topology": {
        "local": SRL, "remote": HU, "rtts_ms": {"X-Y": 10}}}, headers=auth), 422)
    assert domain["errors"][0]["loc"] == domain["loc"] and "X-Y" in domain["loc"]


def test_the_202s_say_where_to_poll_and_when(client, auth):
    tid = _topology(client, auth)
    r = client.post("/recommendations", json={"topology_id": tid}, headers=auth)
    assert r.status_code == 202 and r.headers["location"] == r.json()["poll_url"]
    assert int(r.headers["retry-after"]) > 0
    # the answer queued a campaign: a second one is refused until it ends
    campaign_id = int(r.json()["poll_url"].rsplit("/", 1)[1])
    client.post(f"/campaigns/{campaign_id}/cancel", headers=auth)
    r = client.post("/campaigns", json={"topology_id": tid}, headers=auth)
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/campaigns/{r.json()['id']}"
    assert int(r.headers["retry-after"]) > 0


def test_the_openapi_document_declares_problems_headers_and_scopes(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    scheme = doc["components"]["securitySchemes"]["HTTPBearer"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    assert "read" in scheme["description"] and "write" in scheme["description"]
    assert paths["/sites"]["post"]["security"] == [{"HTTPBearer": ["write"]}]
    assert {"HTTPBearer": ["read"]} in paths["/sites"]["get"]["security"]
    assert paths["/health"]["get"]["security"] == []
    for path, method in (("/campaigns", "post"), ("/recommendations", "post"),
                         ("/topologies/{topology_id}/apply", "post"),
                         ("/topologies/{topology_id}/rollback", "post")):
        headers = paths[path][method]["responses"]["202"]["headers"]
        assert {"Location", "Retry-After"} <= set(headers), (path, headers)
    assert set(paths["/sites"]["post"]["responses"]["201"]["headers"]) == {"Location"}
    errors = [(path, code, response) for path, ops in paths.items() for op in ops.values()
              for code, response in op["responses"].items() if int(code) >= 400]
    assert len(errors) > 20
    for path, code, response in errors:
        assert list(response["content"]) == [PROBLEM], (path, code)
        assert response["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}
    problem = doc["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "loc", "errors"} <= set(problem["properties"])
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_an_apply_and_its_rollback_have_urls_of_their_own(client, auth, db_session):
    tid = _topology(client, auth)
    plan = {"answer": {"opm": "PCDC"}, "used": ["U-C"], "standbys": []}
    first = applied.add_apply(db_session, topology_id=tid, recommendation_id=None, plan=plan)
    applied.finish(db_session, first, "applied")
    db_session.commit()
    url = f"/topologies/{tid}/applies/{first.id}"
    one = client.get(url)
    assert one.status_code == 200 and one.json()["id"] == first.id
    assert one.json()["state"] == "applied"
    assert client.get(f"/topologies/{tid}/applies").json() == client.get(
        f"/topologies/{tid}/applied").json() == [one.json()]
    assert "not rolled back" in _problem(client.get(url + "/rollback"), 404)["detail"]
    assert _problem(client.get(f"/topologies/{tid}/applies/999999"), 404)
    other = client.post("/sites", json={**HU, "name": "Other"}, headers=auth).json()["id"]
    srl = client.get(f"/topologies/{tid}").json()["local_site"]["id"]
    elsewhere = client.post("/topologies", json={"local_site_id": other,
                                                 "remote_site_id": srl}, headers=auth)
    assert _problem(client.get(f"/topologies/{elsewhere.json()['id']}/applies/{first.id}"),
                    404)["detail"].endswith(f"for topology {elsewhere.json()['id']}")

    applied.finish(db_session, first, "rolled_back")
    db_session.commit()
    back = client.get(url + "/rollback")
    assert back.status_code == 200 and back.json()["state"] == "rolled_back"
    _problem(client.get(f"/topologies/{tid}/applies/0"), 422)
