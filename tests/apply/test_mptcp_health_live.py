"""The MPTCP health gate against a real fault: inside a testbed site's namespace, nftables drops
every SYN that carries the MPTCP option (a middlebox that blackholes MP_CAPABLE). The kernel
falls back to TCP after its SYN retries and starts its blackhole lockout; the probe that ran
into it fails saying why, the site's `mptcp_health` shows it, and a calibration and an apply
are refused with a 409 naming the cause. With the rule gone and the lockout ended, MPTCP works
again and so does the gate. Nothing outside the testbed's namespaces is touched."""

from __future__ import annotations

import secrets
import shutil

import pytest
from fastapi.testclient import TestClient

from probes.base import MeasurementRequest
from probes.netns import run_ns
from probes.site.local import capability_report
from probes.site.mptcp_health import mptcp_health
from probes.testbed.spec import parse_spec
from service.algorithm.topology import TopologySpec
from tests.apply import livebed
from tests.support import running_testbed

pytestmark = pytest.mark.netns

TABLE = "mpcoa_fault"


@pytest.fixture(scope="module")
def bed():
    if shutil.which("nft") is None:
        pytest.fail("nft (Debian package nftables) is not installed: scripts/bootstrap "
                    "installs it")
    spec = parse_spec({"name": f"mh{secrets.token_hex(3)}",
                       "sites": [livebed.site("A", livebed.SITES["A"]),
                                 livebed.site("B", livebed.SITES["B"])],
                       "defaults": {"delay_ms": 5}})
    with running_testbed(spec) as testbed:
        yield testbed


def _drop_mp_capable_syns(ns: str) -> None:
    """The fault: A's own SYNs with the MPTCP option are dropped on their way out."""
    for argv in (["add", "table", "inet", TABLE],
                 ["add", "chain", "inet", TABLE, "out",
                  "{ type filter hook output priority 0 ; }"],
                 ["add", "rule", "inet", TABLE, "out", "tcp", "flags", "syn", "tcp", "option",
                  "mptcp", "exists", "counter", "drop"]):
        run_ns(ns, ["nft", *argv])


def _clear_fault(ns: str) -> None:
    run_ns(ns, ["nft", "delete", "table", "inet", TABLE], check=False)


def _probe(bed):
    return bed.measure(MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=3))


def _store(session, campaign_id: int, result, run: int) -> None:
    from service.flows.campaign import recording
    from service.flows.campaign.plan import ProbeStep

    step = ProbeStep(phase="impact", pm="FullMesh", cc="cubic", bs_mib=0.0, run=run)
    recording.record(session, recording.from_result(
        campaign_id=campaign_id, step=step, duration_s=2.0, result=result))
    session.commit()


def test_dropped_mp_capable_syns_lock_out_mptcp_and_the_gate_refuses(
        bed, database_url, tmp_path, monkeypatch):
    from api.app import create_app
    from service.db import make_engine, session_scope
    from service.settings import Settings, get_settings
    from service.store import tokens
    from service.store.inventory import ensure_topology
    from tests.apply.measured import measured_answer

    ns_a = bed.ns("A")
    monkeypatch.setenv("MPCOA_TESTBED", bed.name)
    monkeypatch.setenv("MPCOA_DATABASE_URL", database_url)
    get_settings.cache_clear()
    settings = Settings(database_url=database_url, data_dir=tmp_path, run_campaigns=False,
                        reads_need_token=False, testbed=bed.name, mptcp_fallback_limit=1,
                        _env_file=None)
    engine = make_engine(database_url)
    topology = TopologySpec.model_validate({"local": livebed.site("A", livebed.SITES["A"]),
                                            "remote": livebed.site("B", livebed.SITES["B"])})
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=topology).id
        measured_answer(s, tid, outputs={"subflows_used": ["U-C", "U-D"],
                                         "standby_subflows": ["K-C", "K-D"]})
        token = tokens.create_token(s, name=f"mh{secrets.token_hex(3)}")
    auth = {"Authorization": f"Bearer {token}"}
    try:
        with TestClient(create_app(settings), raise_server_exceptions=False,
                        base_url="http://localhost") as client:
            healthy = mptcp_health(ns_a)
            assert healthy["lockout"]["in_force"] is False, healthy
            started = client.post("/campaigns", json={"topology_id": tid}, headers=auth)
            assert started.status_code == 202, started.text
            cid = started.json()["id"]
            assert client.post(f"/campaigns/{cid}/cancel", headers=auth).status_code == 200

            _drop_mp_capable_syns(ns_a)
            fell_back = _probe(bed)
            # failed by the `ss -M` check, and the counters say why
            assert not fell_back.mptcp_ok
            why = fell_back.failure_reason() or ""
            assert "MP_CAPABLE were dropped" in why and "MPCapableSYNTXDrop" in why, why
            rose = fell_back.mptcp_counters["sender"]
            assert rose["MPCapableSYNTXDrop"] >= 1 and rose["Blackhole"] >= 1, rose
            assert "receiver" in fell_back.mptcp_counters
            with session_scope(engine) as s:
                _store(s, cid, fell_back, 1)

            locked = mptcp_health(ns_a)
            assert locked["lockout"]["in_force"] is True, locked
            assert locked["counters"]["Blackhole"] >= 1
            assert locked["counters"]["MPCapableSYNTXDrop"] >= 1
            assert any("lockout in force" in p for p in locked["problems"])
            report = capability_report(None, ns=ns_a)
            assert report["mptcp_health"]["lockout"]["in_force"] is True
            assert any("lockout in force" in p for p in report["problems"])
            assert mptcp_health(bed.ns("B"))["lockout"]["in_force"] is False  # per namespace

            for url, body in (("/campaigns", {"topology_id": tid}),
                              (f"/topologies/{tid}/apply", {})):
                refused = client.post(url, json=body, headers=auth)
                assert refused.status_code == 409, (url, refused.text)
                detail = refused.json()["detail"]
                assert "site 'A'" in detail and "blackhole lockout in force" in detail, detail
                assert refused.headers["content-type"].startswith("application/problem+json")

            _clear_fault(ns_a)
            # writing the sysctl ends the kernel's lockout (net/mptcp/ctrl.c)
            run_ns(ns_a, ["sysctl", "-q", "-w", "net.mptcp.blackhole_timeout=3600"])
            cleared = mptcp_health(ns_a)
            assert cleared["lockout"]["in_force"] is False, cleared
            assert cleared["counters"]["Blackhole"] == locked["counters"]["Blackhole"]
            # the lockout is gone; the stored fallback still refuses (limit 1)
            refused = client.post("/campaigns", json={"topology_id": tid}, headers=auth)
            assert refused.status_code == 409, refused.text
            detail = refused.json()["detail"]
            assert "fell back to TCP" in detail and "lockout" not in detail.split(":")[0]

            kept = _probe(bed)
            assert kept.mptcp_ok, kept.fallback_reason
            rose = kept.mptcp_counters["sender"]
            assert rose["MPCapableSYNTXDrop"] == 0 and rose["MPCapableSYNTXDisabled"] == 0
            assert rose["MPCapableSYNTX"] >= 1, rose
            with session_scope(engine) as s:
                _store(s, cid, kept, 2)
            again = client.post("/campaigns", json={"topology_id": tid}, headers=auth)
            assert again.status_code == 202, again.text
    finally:
        _clear_fault(ns_a)
        run_ns(ns_a, ["sysctl", "-q", "-w", "net.mptcp.blackhole_timeout=3600"], check=False)
        engine.dispose()
        get_settings.cache_clear()
