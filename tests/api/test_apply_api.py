"""The apply endpoints' plan for real sites (known by their workers' reports) and their errors;
nothing here changes a host: real sites apply through their own workers."""

from __future__ import annotations

import secrets

import pytest

from probes.site.config import read_state
from probes.site.local import LocalSite, capability_report
from service.store import artifacts, tokens
from tests.builders import post_topology

from .conftest import HU, SRL

pytestmark = pytest.mark.postgres


# names of their own: with a running testbed of the paper's site names, an apply is refused
LOCAL, REMOTE = f"SRL{secrets.token_hex(3)}", f"HU{secrets.token_hex(3)}"


def _topology(client, auth) -> int:
    rtts = {f"{lo}-{r}": 300.0 for lo in "UKPT" for r in ("C", "CU")}
    return post_topology(client, auth, {**SRL, "name": LOCAL}, {**HU, "name": REMOTE},
                         rtts)["id"]


def _report(db_session, name: str, isps: dict[str, str]) -> None:
    """A site worker's report as it stores it (the host's settings, read only)."""
    report = capability_report(LocalSite(name, isps))
    report["config"] = read_state(None)
    artifacts.save_capabilities(db_session, site_name=name, report=report)
    db_session.commit()


def test_plan_for_real_sites_and_the_errors(client, auth, db_session):
    assert client.get("/topologies/999999/apply-plan", headers=auth).status_code == 404
    tid = _topology(client, auth)
    r = client.get(f"/topologies/{tid}/apply-plan", headers=auth)
    assert r.status_code == 409 and "has no answer yet" in r.json()["detail"]
    ans = client.post("/recommendations", json={"topology_id": tid}, headers=auth)
    assert ans.status_code == 202, ans.text  # provisional: the paper's rules
    r = client.get(f"/topologies/{tid}/apply-plan", headers=auth)
    assert r.status_code == 409 and "has not reported its addresses" in r.json()["detail"]

    _report(db_session, LOCAL, {"U": "192.0.2.1", "K": "192.0.2.2", "P": "192.0.2.3",
                                "T": "192.0.2.4"})
    _report(db_session, REMOTE, {"C": "198.51.100.1", "CU": "198.51.100.2"})
    r = client.get(f"/topologies/{tid}/apply-plan", headers=auth)
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["answer"]["kind"] == "provisional"
    assert [s["where"] for s in plan["sites"]] == ["site worker", "site worker"]
    sender = plan["sites"][0]
    assert [e["address"] for e in sender["endpoints"]] == [
        "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]
    host = read_state(None)["sysctls"]
    changes = {c["key"]: c for c in sender["changes"]}
    # a provisional answer names no CC: the kernel's default stays
    assert "net.ipv4.tcp_congestion_control" not in changes
    wmem = changes["net.ipv4.tcp_wmem"]
    assert wmem["before"] == host["net.ipv4.tcp_wmem"] and wmem["scope"] == "netns"
    obs_bytes = round(plan["answer"]["obs_mib"] * 2**20)
    assert wmem["after"].split()[2] == str(2 * obs_bytes)
    assert changes["net.core.rmem_max"]["scope"] == "host"
    assert "net.core.rmem_max" in plan["scopes"]["host_wide"]

    # real sites apply through their own workers: never from the API process's host
    r = client.post(f"/topologies/{tid}/apply", json={"allow_unmeasured": True}, headers=auth)
    assert r.status_code == 409 and "real hosts" in r.json()["detail"]
    assert client.get(f"/topologies/{tid}/applied", headers=auth).json() == []
    r = client.post(f"/topologies/{tid}/rollback", headers=auth)
    assert r.status_code == 409 and "nothing to roll back" in r.json()["detail"]
    r = client.post(f"/topologies/{tid}/apply", json={"seconds": 1}, headers=auth)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "seconds"]
    r = client.post(f"/topologies/{tid}/apply", json={"nope": 1}, headers=auth)
    assert r.status_code == 422


def test_apply_needs_a_write_token(client, db_session):
    reader = tokens.create_token(db_session, name="reader", scope="read")
    db_session.commit()
    r = client.post("/topologies/1/apply", headers={"Authorization": f"Bearer {reader}"})
    assert r.status_code == 403
    assert client.post("/topologies/1/apply").status_code == 401


def test_the_topology_page_shows_what_is_applied(client, auth, db_session):
    from service.store import applied

    tid = _topology(client, auth)
    page = client.get(f"/dashboard/topologies/{tid}")
    assert page.status_code == 200 and "No answer applied to the sites yet" in page.text
    plan = {"answer": {"opm": "PCDC", "occ": "reno", "obs_mib": 0.5}, "used": ["U-C", "K-C"],
            "standbys": ["U-CU"]}
    row = applied.add_apply(db_session, topology_id=tid, recommendation_id=None, plan=plan)
    applied.set_site(db_session, row, LOCAL, {"state": "applied", "namespace": None,
                                              "changed": ["sysctl net.ipv4.tcp_wmem"]})
    applied.finish(db_session, row, "applied", confirmation={
        "goodput_mbps": 11.25, "threshold_mbps": 10.5, "kernel_over_userspace": 0.98})
    applied.append_event(db_session, apply_id=row.id, kind="failover", site=LOCAL,
                         detail={"endpoint": 1, "promoted": 2})
    db_session.commit()
    page = client.get(f"/dashboard/topologies/{tid}")
    assert page.status_code == 200
    for text in ("U-C, K-C", "11.250", "10.500", "0.980", "sysctl net.ipv4.tcp_wmem",
                 f"failover at {LOCAL}"):
        assert text in page.text, text
    listed = client.get(f"/topologies/{tid}/applied", headers=auth).json()
    assert [a["state"] for a in listed] == ["applied"]
    assert listed[0]["events"][0]["kind"] == "failover"


def test_apply_bounds_watch_and_hold_s(client, auth):
    """The watcher's settings are outside input: bounded, a clear 422, never a 500."""
    tid = _topology(client, auth)
    for body in ({"hold_s": 0.1}, {"hold_s": 601}, {"hold_s": -3}, {"hold_s": "soon"},
                 {"hold_s": None}, {"watch": "maybe"}, {"watch": 2}, {"hold": 3},
                 {"auto_reapply": "maybe"}, {"auto_reapply": None}):
        r = client.post(f"/topologies/{tid}/apply", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
        field = next(iter(body))
        assert any(field in e["loc"] for e in r.json()["errors"]), r.json()
    # in bounds, it gets past validation to the flow: no answer yet for this topology
    r = client.post(f"/topologies/{tid}/apply", json={"hold_s": 0.5, "watch": False},
                    headers=auth)
    assert r.status_code == 409 and "has no answer yet" in r.json()["detail"]
