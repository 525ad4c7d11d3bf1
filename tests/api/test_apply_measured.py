"""Only measured answers are applied unless asked for, and a plan's buffer stays within what the
answer's campaign measured and the configured ceiling. Real sites known by their workers'
reports: nothing here changes a host."""

from __future__ import annotations

import secrets

import pytest

from probes.site.config import read_state
from probes.site.local import LocalSite, capability_report
from service.errors import Conflict
from service.flows.applying import apply as apply_flow
from service.settings import get_settings
from service.store import artifacts
from tests.apply.measured import measured_answer

from .conftest import HU, SRL

pytestmark = pytest.mark.postgres

LOCAL, REMOTE = f"SRL{secrets.token_hex(3)}", f"HU{secrets.token_hex(3)}"
MIB = 2**20


@pytest.fixture
def tid(client, auth, db_session) -> int:
    a = client.post("/sites", json={**SRL, "name": LOCAL}, headers=auth).json()
    b = client.post("/sites", json={**HU, "name": REMOTE}, headers=auth).json()
    rtts = {f"{lo}-{r}": 300.0 for lo in "UKPT" for r in ("C", "CU")}
    r = client.post("/topologies", json={"local_site_id": a["id"], "remote_site_id": b["id"],
                                         "rtts_ms": rtts}, headers=auth)
    for name, isps in ((LOCAL, {"U": "192.0.2.1", "K": "192.0.2.2", "P": "192.0.2.3",
                                "T": "192.0.2.4"}),
                       (REMOTE, {"C": "198.51.100.1", "CU": "198.51.100.2"})):
        report = capability_report(LocalSite(name, isps))
        report["config"] = read_state(None)
        artifacts.save_capabilities(db_session, site_name=name, report=report)
    db_session.commit()
    return r.json()["id"]


def _changes(plan: dict) -> dict:
    return {c["key"]: c for c in plan["sites"][0]["changes"]}


def test_a_provisional_answer_is_refused_unless_asked_for(client, auth, db_session, tid):
    ans = client.post("/recommendations", json={"topology_id": tid}, headers=auth)
    assert ans.status_code == 202 and ans.json()["provisional"], ans.text
    plan = client.get(f"/topologies/{tid}/apply-plan", headers=auth).json()
    assert plan["measured"]["measured"] is False
    assert "provisional: no probe measured it" in plan["measured"]["why"]

    r = client.post(f"/topologies/{tid}/apply", json={}, headers=auth)
    assert r.status_code == 409, r.text
    detail = r.json()["detail"]
    assert "provisional: no probe measured it" in detail and "allow_unmeasured" in detail
    assert client.get(f"/topologies/{tid}/applied", headers=auth).json() == []
    r = client.post(f"/topologies/{tid}/apply", json={"allow_unmeasured": "perhaps"},
                    headers=auth)
    assert r.status_code == 422
    # asked for: past the check (these sites then apply through their own workers only)
    r = client.post(f"/topologies/{tid}/apply", json={"allow_unmeasured": True}, headers=auth)
    assert r.status_code == 409 and "real hosts" in r.json()["detail"]
    with pytest.raises(Conflict, match="allow_unmeasured"):
        apply_flow.start_apply(db_session, topology_id=tid, site_hosts=True)
    row = apply_flow.start_apply(db_session, topology_id=tid, site_hosts=True,
                                 allow_unmeasured=True)
    assert row.state == "applying" and row.plan["allow_unmeasured"] is True
    assert row.plan["answer"]["kind"] == "provisional"
    db_session.rollback()


def test_a_host_ceiling_is_lowered_only_when_asked(client, auth, db_session, tid):
    assert client.post("/recommendations", json={"topology_id": tid}, headers=auth
                       ).status_code == 202
    r = client.get(f"/topologies/{tid}/apply-plan?lower_ceilings=perhaps", headers=auth)
    assert r.status_code == 422
    r = client.post(f"/topologies/{tid}/apply", json={"lower_ceilings": "yes",
                                                      "allow_unmeasured": True}, headers=auth)
    assert r.status_code == 422, r.text
    host = read_state(None)["sysctls"]
    for asked in (False, True):
        plan = client.get(f"/topologies/{tid}/apply-plan?lower_ceilings={str(asked).lower()}",
                          headers=auth).json()
        assert plan["lower_ceilings"] is asked
        planned = plan["buffer"]["regimes"]["autotune_max_bytes"]["bytes"]
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            entry = _changes(plan)[key]
            have = int(host[key].split()[2])
            want = planned if asked else max(planned, have)
            assert int(entry["after"].split()[2]) == want, entry
            assert entry["regime"] == "autotuning ceiling"
    row = apply_flow.start_apply(db_session, topology_id=tid, site_hosts=True,
                                 allow_unmeasured=True, lower_ceilings=True)
    assert row.plan["lower_ceilings"] is True
    db_session.rollback()


def test_a_calibrated_answer_without_measurements_is_unmeasured(client, auth, db_session, tid):
    rec = measured_answer(db_session, tid, outputs={"subflows_used": ["U-C"]})
    rec.campaign_id = None  # its campaign deleted: nothing shows what was measured
    db_session.commit()
    r = client.post(f"/topologies/{tid}/apply", json={}, headers=auth)
    assert r.status_code == 409 and "no measurements to show for it" in r.json()["detail"]


def test_an_answer_of_a_million_mib_is_planned_within_its_measurements(client, auth,
                                                                       db_session, tid):
    """As an imported answer with obs_mib 1e6 was planned: rmem_max 1 GiB, tcp_rmem 2 GiB."""
    measured_answer(db_session, tid, largest_mib=30.0, obs_mib=1e6,
                    outputs={"subflows_used": ["U-C", "K-C"]})
    db_session.commit()
    plan = client.get(f"/topologies/{tid}/apply-plan", headers=auth).json()
    assert plan["measured"] == {"measured": True, "why": None, "largest_buffer_mib": 30.0}
    assert plan["buffer"]["capped_by"] == "largest_measured"
    assert plan["buffer"]["answer_bytes"] == round(1e6 * MIB)
    assert f"buffer_capped:largest_measured={30 * MIB}" in plan["notes"]
    changes = _changes(plan)
    assert changes["net.core.rmem_max"]["minimum"] == 30 * MIB
    assert changes["net.ipv4.tcp_rmem"]["after"].split()[2] == str(60 * MIB)
    assert plan["sites"][0]["socket_buffer_bytes"] == 30 * MIB


def test_the_configured_ceiling_bounds_a_plan(client, auth, db_session, tid, monkeypatch):
    measured_answer(db_session, tid, largest_mib=30.0, obs_mib=24.0,
                    outputs={"subflows_used": ["U-C"]})
    db_session.commit()
    monkeypatch.setenv("MPCOA_APPLY_BUFFER_CEILING_MIB", "16")
    get_settings.cache_clear()
    try:
        plan = client.get(f"/topologies/{tid}/apply-plan", headers=auth).json()
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert plan["buffer"]["capped_by"] == "ceiling" and plan["buffer"]["planned_bytes"] == \
        16 * MIB
    assert "MPCOA_APPLY_BUFFER_CEILING_MIB" in plan["buffer"]["why"]
    assert _changes(plan)["net.ipv4.tcp_wmem"]["after"].split()[2] == str(32 * MIB)
    # the default ceiling (128 MiB) leaves a measured 24 MiB as it is
    plan = client.get(f"/topologies/{tid}/apply-plan", headers=auth).json()
    assert plan["buffer"]["capped_by"] is None and plan["buffer"]["planned_bytes"] == 24 * MIB


def test_the_answers_autotuning_ceiling_is_measured_and_applied(client, auth, db_session, tid):
    """Autotune probes (no buffer, under a ceiling each) decide autotune_max_mib; the plan
    writes it as tcp_rmem/tcp_wmem max, and they never bound the locked buffer."""
    from datetime import timedelta

    from models import Campaign, utcnow
    from service.flows.answers import calibrated
    from service.flows.answers.answer import Outputs
    from service.store import measurements

    rec = measured_answer(db_session, tid, largest_mib=4.0, obs_mib=0.5,
                          outputs={"subflows_used": ["U-C"]})
    now = utcnow()
    runs = {1.0: [3.0, 3.2], 4.0: [6.9, 7.0], 8.0: [7.1, 7.0], 64.0: [7.05, 7.1]}
    for ceiling, goodputs in runs.items():
        for run, mbps in enumerate(goodputs):
            measurements.record_measurement(db_session, measurements.MeasurementRecord(
                campaign_id=rec.campaign_id, phase="autotune", pm="PCDC", cc="reno",
                bs_mib=ceiling, run=run, subflows=["U-C"], duration_s=3.0,
                goodput_mbps=[mbps] * 3, tool="iperf3", started_at=now - timedelta(seconds=3),
                finished_at=now))
    db_session.flush()
    # the ceilings the autotune probes ran under are not buffers a probe locked
    assert measurements.largest_buffer(db_session, campaign_id=rec.campaign_id) == 4.0
    outputs = Outputs()
    calibrated._with_autotune(outputs, db_session, db_session.get(Campaign, rec.campaign_id),
                              "PCDC", "reno", 0.07)
    assert outputs.autotune_max_mib == 4.0, outputs
    low, high = outputs.autotune_interval_mbps
    assert outputs.autotune_otp_mbps == pytest.approx(6.95)
    assert low <= outputs.autotune_otp_mbps <= high

    rec.outputs = {**rec.outputs, **outputs.model_dump(mode="json", include={
        "autotune_max_mib", "autotune_otp_mbps", "autotune_interval_mbps"})}
    db_session.commit()
    plan = client.get(f"/topologies/{tid}/apply-plan?lower_ceilings=true", headers=auth).json()
    assert plan["answer"]["autotune_max_mib"] == 4.0
    assert plan["buffer"]["regimes"]["autotune_max_bytes"] == {
        "bytes": 4 * MIB, "regime": "autotuning ceiling", "from": "autotune_max_mib",
        "for": "applications that set no socket buffer", "lower_ceilings": True}
    assert _changes(plan)["net.ipv4.tcp_rmem"]["after"].split()[2] == str(4 * MIB)
    assert _changes(plan)["SO_SNDBUF/SO_RCVBUF"]["after"] == MIB // 2
    from api.schemas import RecommendationOut  # an Outputs: the field is sent with the answer

    assert {"autotune_max_mib", "autotune_otp_mbps", "autotune_interval_mbps"} <= set(
        RecommendationOut.model_fields)
