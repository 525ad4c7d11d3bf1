"""Sites as the tests write them, for a topology (`probes.vocabulary.Site`) or a testbed file
(a dict): one spelling of a site and its ISPs for every test folder."""

from __future__ import annotations

from collections.abc import Iterable


def site(name: str, isps: Iterable[tuple]) -> dict:
    """A site as a topology body or a testbed file has it. Each ISP is (label, kbps): named
    `isp<label>`, the same rate both ways; or (name, label, down_kbps, up_kbps)."""
    rows = [(f"isp{i[0]}", i[0], i[1], i[1]) if len(i) == 2 else tuple(i) for i in isps]
    return {"name": name, "isps": [{"name": n, "label": lb, "down_kbps": d, "up_kbps": u}
                                   for n, lb, d, u in rows]}


def paper_site(name: str, renamed: str | None = None):
    """One of the paper's sites (Table 1, `tests.algorithm.paper_data.SITES`) as a `Site`,
    under `renamed` when given."""
    from probes.vocabulary import Site
    from tests.algorithm.paper_data import SITES

    return Site.model_validate(site(renamed or name, SITES[name]))


def post_topology(client, auth: dict | None, local: dict, remote: dict,
                  rtts_ms: dict[str, float] | None = None) -> dict:
    """Both sites and their topology POSTed to the API (`client`: a TestClient or an
    httpx.Client; `auth`: its headers, None when the client has its own); the topology as the
    API returns it."""
    ids = []
    for one in (local, remote):
        r = client.post("/sites", json=one, headers=auth)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    body: dict = {"local_site_id": ids[0], "remote_site_id": ids[1]}
    if rtts_ms:
        body["rtts_ms"] = rtts_ms
    r = client.post("/topologies", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()
