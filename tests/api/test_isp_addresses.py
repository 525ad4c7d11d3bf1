"""ISP addresses in the API: IPv4 or IPv6, written as the kernel prints them; anything else a
422 naming the field; an apply refuses a worker whose addresses are not the registered ones."""

from __future__ import annotations

import pytest

from service.errors import Conflict
from service.flows.applying import apply_plan
from service.store import inventory

from .conftest import HU

V6 = {**HU, "isps": [{**HU["isps"][0], "address": "2001:DB8:0:0::2"},
                     {**HU["isps"][1], "address": "2001:db8:1::2"}]}


def test_a_site_with_ipv6_addresses(client, auth):
    r = client.post("/sites", json=V6, headers=auth)
    assert r.status_code == 201, r.text
    site = r.json()
    assert [i["address"] for i in site["isps"]] == ["2001:db8::2", "2001:db8:1::2"]
    assert client.get(f"/sites/{site['id']}").json()["isps"] == site["isps"]
    v4 = {**V6, "isps": [{**V6["isps"][0], "address": "192.0.2.10"}, HU["isps"][1]]}
    r = client.put(f"/sites/{site['id']}", json=v4, headers=auth)
    assert r.status_code == 200, r.text
    assert [i["address"] for i in r.json()["isps"]] == ["192.0.2.10", None]


@pytest.mark.parametrize(("address", "says"), [
    ("not-an-ip", "not an IPv4 or IPv6 address"),
    ("2001:db8::1/64", "not an IPv4 or IPv6 address"),
    ("10.0.0.256", "not an IPv4 or IPv6 address"),
    ("fe80::1", "link-local"),
    ("::ffff:192.0.2.1", "IPv4-mapped"),
    ("::", "not a host's address"),
    (5, "string"),
])
def test_garbage_is_a_422_naming_the_field(client, auth, address, says):
    body = {**HU, "isps": [{**HU["isps"][0], "address": address}, HU["isps"][1]]}
    r = client.post("/sites", json=body, headers=auth)
    assert r.status_code == 422, r.text
    err = r.json()["errors"][0]
    assert err["loc"] == ["body", "isps", 0, "address"] and says in err["msg"], err


def test_one_family_and_distinct_addresses_per_site(client, auth):
    mixed = {**HU, "isps": [{**HU["isps"][0], "address": "192.0.2.1"},
                            {**HU["isps"][1], "address": "2001:db8::1"}]}
    r = client.post("/sites", json=mixed, headers=auth)
    assert r.status_code == 422 and "both families" in r.text
    same = {**HU, "isps": [{**HU["isps"][0], "address": "2001:db8::1"},
                           {**HU["isps"][1], "address": "2001:DB8::1"}]}
    r = client.post("/sites", json=same, headers=auth)
    assert r.status_code == 422 and "duplicate ISP address" in r.text


def test_inline_sites_match_with_or_without_addresses(db_session):
    from probes.vocabulary import Site
    from service.algorithm.topology import TopologySpec
    from tests.api.conftest import SRL

    stored = Site.model_validate(V6)
    inventory.create_site(db_session, spec=stored)
    plain = Site.model_validate(HU)  # no addresses: the same site
    topo = inventory.ensure_topology(db_session, spec=TopologySpec(
        local=Site.model_validate(SRL), remote=plain))
    assert topo.remote_site.name == "HU"
    other = Site.model_validate({**V6, "isps": [{**V6["isps"][0], "address": "2001:db8::9"},
                                                V6["isps"][1]]})
    with pytest.raises(Conflict, match="other ISPs"):
        inventory.ensure_site(db_session, spec=other)


def test_an_apply_refuses_a_worker_with_other_addresses(db_session):
    from probes.vocabulary import Site

    inventory.create_site(db_session, spec=Site.model_validate(V6))
    assert inventory.registered_addresses(db_session, site="HU") == {
        "C": "2001:db8::2", "CU": "2001:db8:1::2"}
    apply_plan._check_registered(db_session, "HU", {"C": "2001:db8::2", "CU": "2001:db8:1::2"})
    with pytest.raises(Conflict, match=r"CU: registered 2001:db8:1::2, reported 10\.0\.0\.2"):
        apply_plan._check_registered(db_session, "HU", {"C": "2001:db8::2", "CU": "10.0.0.2"})
