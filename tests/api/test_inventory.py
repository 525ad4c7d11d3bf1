"""Sites with ISPs and topologies: create, read, update, delete, and their 404/409/422."""

from __future__ import annotations

import pytest

from .conftest import HAW, HU, SRL, UIT

pytestmark = pytest.mark.postgres


def test_site_crud(client, auth):
    r = client.post("/sites", json={**SRL, "description": "Simula"}, headers=auth)
    assert r.status_code == 201, r.text
    site = r.json()
    assert r.headers["location"] == f"/sites/{site['id']}"
    assert [i["label"] for i in site["isps"]] == ["U", "K", "P", "T"]
    assert client.get(f"/sites/{site['id']}").json() == site
    listed = client.get("/sites", params={"limit": 1}).json()
    assert listed["total"] >= 1 and len(listed["items"]) == 1
    changed = {**SRL, "isps": [*SRL["isps"][:3]], "description": "three ISPs"}
    r = client.put(f"/sites/{site['id']}", json=changed, headers=auth)
    assert r.status_code == 200, r.text
    assert [i["label"] for i in r.json()["isps"]] == ["U", "K", "P"]
    assert client.delete(f"/sites/{site['id']}", headers=auth).status_code == 204
    assert client.get(f"/sites/{site['id']}").status_code == 404
    assert client.delete(f"/sites/{site['id']}", headers=auth).status_code == 404


def test_site_conflicts_and_validation(client, auth):
    assert client.post("/sites", json=SRL, headers=auth).status_code == 201
    assert client.post("/sites", json=SRL, headers=auth).status_code == 409
    dup = {**HU, "isps": [HU["isps"][0], {**HU["isps"][1], "label": "C"}]}
    r = client.post("/sites", json=dup, headers=auth)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "isps"]
    bad = {**HU, "isps": [{**HU["isps"][0], "down_kbps": -5}]}
    r = client.post("/sites", json=bad, headers=auth)
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == ["body", "isps", 0, "down_kbps"]
    r = client.post("/sites", json={**HU, "name": "has space"}, headers=auth)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "name"]
    r = client.post("/sites", json={**HU, "extra": 1}, headers=auth)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "extra"]
    assert client.get("/sites/0").status_code == 422
    assert client.get(f"/sites/{2**40}").status_code == 422


def test_topology_lifecycle(client, auth):
    a = client.post("/sites", json=SRL, headers=auth).json()
    b = client.post("/sites", json=HU, headers=auth).json()
    r = client.post(
        "/topologies",
        json={"local_site_id": a["id"], "remote_site_id": b["id"], "rtts_ms": {"K-C": 310}},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    topo = r.json()
    names = [sf["name"] for sf in topo["subflows"]]
    assert names == ["U-C", "U-CU", "K-C", "K-CU", "P-C", "P-CU", "T-C", "T-CU"]
    bw = {sf["name"]: sf["bandwidth_kbps"] for sf in topo["subflows"]}
    assert bw["P-C"] == 256 and bw["K-CU"] == 20000  # min(local up, remote down)
    assert topo["homogeneous"] is False
    assert {sf["name"]: sf["rtt_ms"] for sf in topo["subflows"]}["K-C"] == 310
    # duplicate pair, same site twice, unknown site
    dup = {"local_site_id": a["id"], "remote_site_id": b["id"]}
    assert client.post("/topologies", json=dup, headers=auth).status_code == 409
    same = {"local_site_id": a["id"], "remote_site_id": a["id"]}
    assert client.post("/topologies", json=same, headers=auth).status_code == 422
    missing = {"local_site_id": a["id"], "remote_site_id": 2**31 - 1}
    assert client.post("/topologies", json=missing, headers=auth).status_code == 404
    # RTTs: set, clear, unknown subflow
    r = client.patch(f"/topologies/{topo['id']}", json={"rtts_ms": {"K-C": None, "U-C": 20}},
                     headers=auth)
    assert r.status_code == 200
    rtts = {sf["name"]: sf["rtt_ms"] for sf in r.json()["subflows"]}
    assert rtts["K-C"] is None and rtts["U-C"] == 20
    r = client.patch(f"/topologies/{topo['id']}", json={"rtts_ms": {"Z-Z": 20}}, headers=auth)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "rtts_ms", "Z-Z"]
    # A used site cannot lose an ISP, but its bandwidths may change and the subflows follow.
    r = client.put(f"/sites/{a['id']}", json={**SRL, "isps": SRL["isps"][:2]}, headers=auth)
    assert r.status_code == 409
    faster = {**SRL, "isps": [{**SRL["isps"][2], "up_kbps": 512}, *SRL["isps"][:2],
                              SRL["isps"][3]]}
    assert client.put(f"/sites/{a['id']}", json=faster, headers=auth).status_code == 200
    topo2 = client.get(f"/topologies/{topo['id']}").json()
    assert {sf["name"]: sf["bandwidth_kbps"] for sf in topo2["subflows"]}["P-C"] == 512
    assert client.delete(f"/sites/{a['id']}", headers=auth).status_code == 409
    assert client.delete(f"/topologies/{topo['id']}", headers=auth).status_code == 204
    assert client.delete(f"/sites/{a['id']}", headers=auth).status_code == 204


def test_topology_with_recommendations_is_kept(client, auth):
    r = client.post("/recommendations", json={"topology": {"local": UIT, "remote": HAW}},
                    headers=auth)
    assert r.status_code == 202
    topology_id = r.json()["topology_id"]
    assert client.get(f"/topologies/{topology_id}").json()["homogeneous"] is True
    assert client.delete(f"/topologies/{topology_id}", headers=auth).status_code == 409
    # The inline sites were stored and are matched by content on the next request.
    again = client.post("/recommendations", json={"topology": {"local": UIT, "remote": HAW}},
                        headers=auth)
    assert again.json()["topology_id"] == topology_id
