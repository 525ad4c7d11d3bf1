"""The published OpenAPI document is as strict as the server on request bodies: every body the
server refuses with 422 below is one the document refuses too (JSON Schema 2020-12, formats
checked), and a good body passes both."""

from __future__ import annotations

import copy

import pytest
from jsonschema_rs import Draft202012Validator  # schemathesis's own validator

from .conftest import HU, SRL


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """`component`'s schema in the document the server publishes (GET /openapi.json)."""
    from fastapi.testclient import TestClient

    from api.app import create_app
    from service.settings import Settings

    folder = tmp_path_factory.mktemp("doc")
    app = create_app(Settings(database_url=f"sqlite:///{folder / 'doc.sqlite3'}",
                              data_dir=folder, run_campaigns=False, _env_file=None))
    with TestClient(app, base_url="http://localhost") as c:
        doc = c.get("/openapi.json").json()
    validators: dict[str, Draft202012Validator] = {}

    def valid(component: str, body) -> bool:
        if component not in validators:
            schema = {"$ref": f"#/components/schemas/{component}",
                      "components": doc["components"]}
            validators[component] = Draft202012Validator(schema, validate_formats=True)
        return validators[component].is_valid(body)

    return valid


def _site(**isp):
    site = copy.deepcopy(SRL)
    site["isps"][0].update(isp)
    return site


BAD = [  # (component, path, body): the server's 422, the document's refusal
    ("TopologyIn", "/topologies", {"local_site_id": 1, "remote_site_id": 2,
                                   "rtts_ms": {"not a subflow": 30.0}}),
    ("TopologyIn", "/topologies", {"local_site_id": True, "remote_site_id": 2}),
    ("RecommendationIn", "/recommendations",
     {"topology": {"local": SRL, "remote": HU, "rtts_ms": {"K_C": 3.0}}}),
    ("RecommendationIn", "/recommendations", {}),
    ("RecommendationIn", "/recommendations",
     {"topology_id": 1, "topology": {"local": SRL, "remote": HU}}),
    ("RecommendationIn", "/recommendations", {"topology_id": True}),
    *[("SiteIn", "/sites", _site(address=a))
      for a in ("0.0.0.0", "224.0.0.1", "239.1.2.3", "::", "ff02::1", "fe80::1",
                "::ffff:192.0.2.1", "192.0.2.300", "not-an-address")],
    ("SiteIn", "/sites", {**SRL, "description": "bell\a"}),
    ("SiteIn", "/sites", {**SRL, "description": "right-to-left \u202e override"}),
]


@pytest.mark.parametrize(("component", "path", "body"), BAD)
def test_what_the_server_refuses_the_document_refuses(client, auth, published, component,
                                                      path, body):
    assert client.post(path, json=body, headers=auth).status_code == 422
    assert not published(component, body)


def test_good_bodies_pass_both(client, auth, published):
    good = _site(address="192.0.2.7")
    assert published("SiteIn", good)
    assert client.post("/sites", json=good, headers=auth).status_code == 201
    v6 = copy.deepcopy(HU)
    v6["isps"][0]["address"] = "2001:db8::7"
    assert published("SiteIn", v6)
    body = {"topology": {"local": SRL, "remote": HU, "rtts_ms": {"K-C": 30.0}}}
    assert published("RecommendationIn", body)
    assert client.post("/recommendations", json=body, headers=auth).status_code == 202
    assert published("RecommendationIn", {"topology_id": 1})
