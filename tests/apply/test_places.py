"""Where an apply goes: a site's worker when it reported, a running testbed when no worker did or
MPCOA_TESTBED names it, and a refusal naming both when both claim a site and nothing says which
(an apply meant for real sites must not land in someone's testbed of the same site names)."""

from __future__ import annotations

import secrets

import pytest

from service.errors import Conflict
from tests.apply import livebed

pytestmark = pytest.mark.netns


def _places(monkeypatch, testbed: str | None):
    from service.db import session_scope
    from service.flows.answers.snapshot import snapshot_by_id
    from service.flows.applying.apply_plan import places
    from service.settings import get_settings
    from service.store.inventory import ensure_topology

    if testbed is None:
        monkeypatch.delenv("MPCOA_TESTBED", raising=False)
    else:
        monkeypatch.setenv("MPCOA_TESTBED", testbed)
    get_settings.cache_clear()
    with session_scope() as s:
        tid = ensure_topology(s, spec=livebed.topology()).id
        return places(s, snapshot_by_id(s, tid))


def _worker_reports(sites: dict[str, dict[str, str]]) -> None:
    from service.db import session_scope
    from service.store import artifacts
    from service.store.inventory import ensure_topology

    with session_scope() as s:
        ensure_topology(s, spec=livebed.topology())
        for name, endpoints in sites.items():
            artifacts.save_capabilities(s, site_name=name, report={"endpoints": endpoints,
                                                                   "config": None})


REPORTED = {"A": {"U": "192.0.2.1", "K": "192.0.2.2"}, "B": {"C": "198.51.100.1",
                                                            "D": "198.51.100.2"}}


def test_a_site_both_a_worker_and_a_testbed_claim_is_refused_naming_both(
        bed, embedded_default, monkeypatch):
    _worker_reports({"A": REPORTED["A"]})
    with pytest.raises(Conflict) as refused:
        _places(monkeypatch, None)
    message = str(refused.value)
    assert "'A'" in message and "site worker" in message and "testbed" in message
    assert "MPCOA_TESTBED=" in message


def test_the_named_testbed_wins_over_worker_reports(bed, embedded_default, monkeypatch):
    _worker_reports(REPORTED)
    where = _places(monkeypatch, bed.name)
    assert {p.where for p in where.values()} == {f"testbed {bed.name}"}
    assert where["A"].namespace == bed.ns("A")


def test_reported_sites_go_to_their_workers_when_no_testbed_has_them(
        embedded_default, monkeypatch):
    _worker_reports(REPORTED)
    where = _places(monkeypatch, f"none{secrets.token_hex(3)}")  # no testbed of that name
    assert {p.where for p in where.values()} == {"site worker"}
    assert where["B"].addresses == REPORTED["B"] and where["B"].namespace is None


def test_sites_no_worker_reported_go_to_the_running_testbed(bed, embedded_default,
                                                            monkeypatch):
    where = _places(monkeypatch, None)
    # another person's testbed with sites A and B may be the one found: a testbed all the same
    assert all(p.where.startswith("testbed ") and p.namespace for p in where.values())


def test_a_campaign_probes_no_testbed_of_the_same_site_names_as_reported_workers(
        bed, embedded_default, monkeypatch):
    from probes.base import ProbeError
    from service.flows.campaign.probing import LazyProber

    _worker_reports({"B": REPORTED["B"]})
    with pytest.raises(ProbeError) as refused:
        LazyProber("A", "B").available_ccs()
    assert "'B'" in str(refused.value) and "MPCOA_TESTBED=" in str(refused.value)
    # named: that testbed is meant, workers or not
    assert "cubic" in LazyProber("A", "B", testbed=bed.name).available_ccs()
