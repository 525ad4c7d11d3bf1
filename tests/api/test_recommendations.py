"""POST /recommendations: provisional (202) and calibrated (200) answers, stored and readable."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from service.algorithm.topology import TopologySpec
from service.algorithm.traditional import rto_from_rtt, traditional_buffer
from tests.algorithm.paper_data import TABLE3, TABLE5, TSTAR
from tests.builders import post_topology

from .calibration import RTT_MS, RUNS, seed_srl_hu
from .conftest import HAW, HU, SRL, UIT

pytestmark = pytest.mark.postgres


def test_provisional_heterogeneous_is_pcdc_with_half_eq1_and_queues_a_campaign(client, auth):
    rtts = {f"{a}-{b}": 300.0 + 10 * i for i, (a, b) in
            enumerate((a, b) for a in "UKPT" for b in ("C", "CU"))}
    body = {"topology": {"local": SRL, "remote": HU, "rtts_ms": rtts}, "delta": 0.07}
    r = client.post("/recommendations", json=body, headers=auth)
    assert r.status_code == 202, r.text
    rec = r.json()
    assert rec["provisional"] is True and rec["kind"] == "provisional"
    assert rec["opm"] == "PCDC"  # SRL-HU is heterogeneous (Section 5.3)
    assert "provisional" in rec["quality_flags"]
    spec = TopologySpec.model_validate({"local": SRL, "remote": HU})
    names = spec.subflow_names()
    rtt_s = [rtts[n] / 1000 for n in names]
    expected = traditional_buffer(
        rtt_s, [rto_from_rtt(x) for x in rtt_s], [sf.bandwidth_kbps for sf in spec.subflows()]
    )
    assert rec["traditional"]["available"] is True
    assert rec["traditional"]["buffer_mib"] == pytest.approx(expected.buffer_mib)
    # 50 % of Eq. 1 (32 MiB here), within the range the answer reports (the paper's 0.5..30)
    assert 0.5 * expected.buffer_mib > rec["bs_max_mib"] == 30
    assert rec["obs_mib"] == rec["bs_max_mib"] and "obs_at_bound" in rec["quality_flags"]
    assert rec["traditional"]["rtt_source"] == "topology"
    # The poll URL is the queued campaign.
    assert r.headers["location"] == rec["poll_url"] == f"/campaigns/{rec['campaign_id']}"
    c = client.get(rec["poll_url"]).json()
    assert c["state"] == "queued" and c["executor"] == "inprocess"
    assert c["probes_total"] > 0 and c["progress"] == 0.0
    # A second request reuses the queued campaign rather than queueing another.
    again = client.post("/recommendations", json=body, headers=auth).json()
    assert again["campaign_id"] == rec["campaign_id"] and again["id"] != rec["id"]
    campaigns = client.get("/campaigns", params={"topology_id": rec["topology_id"]}).json()
    assert campaigns["total"] == 1
    # Both answers are stored and readable (Table 5).
    listed = client.get("/recommendations", params={"topology_id": rec["topology_id"]}).json()
    assert [x["id"] for x in listed["items"]] == [again["id"], rec["id"]]


def test_provisional_homogeneous_is_fullmesh_and_unknown_rtt_is_said(client, auth):
    r = client.post("/recommendations", json={"topology": {"local": UIT, "remote": HAW}},
                    headers=auth)
    assert r.status_code == 202, r.text
    rec = r.json()
    assert rec["opm"] == "FullMesh"  # UiT-HAW is homogeneous (Section 5.3)
    assert rec["obs_mib"] is None
    assert rec["traditional"]["available"] is False
    assert set(rec["traditional"]["missing_rtt_subflows"]) == {"P-D", "T-D"}
    assert "eq1_rtt_unknown" in rec["quality_flags"]


def test_calibrated_answer_reproduces_table5_with_provenance(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seeded = seed_srl_hu(db_session, topo["id"])
    r = client.post("/recommendations", json={"topology_id": topo["id"], "delta": 0.07},
                    headers=auth)
    assert r.status_code == 200, r.text
    rec = r.json()
    opm, occ, obs, otp, _b, _ratio = TABLE5["SRL-HU"]
    assert (rec["kind"], rec["opm"], rec["occ"]) == ("calibrated", opm, occ)
    assert rec["obs_mib"] == pytest.approx(obs, abs=0.5)
    assert rec["otp_mbps"] == pytest.approx(otp, rel=0.02)
    assert rec["t_star"]["tp_mbps"] == pytest.approx(TSTAR["SRL-HU"][0], rel=0.02)
    assert rec["target_mbps"] == pytest.approx(0.93 * rec["t_star"]["tp_mbps"])
    # PCDC with Hybla runs SP* of Table 3, and Eq. 1 is over those subflows with measured RTTs.
    assert set(rec["subflows_used"]) == TABLE3["SRL-HU"]["hybla"]
    trad = rec["traditional"]
    assert trad["available"] and trad["rtt_source"] == "measurements"
    assert trad["rtt_max_s"] == pytest.approx(RTT_MS / 1000)
    assert trad["obs_ratio"] == pytest.approx(rec["obs_mib"] / trad["buffer_mib"])
    prov = rec["provenance"]
    assert prov["campaign_id"] == seeded["campaign"].id
    assert sorted(prov["fit_ids"]) == sorted(f.id for f in seeded["fits"])
    assert prov["measurement_count"] == seeded["measurements"]
    assert prov["run_count"] == RUNS
    # the newest measurement's age when the answer was given (seeded a day ago)
    newest = datetime.fromisoformat(prov["newest_measurement_at"])
    given = datetime.fromisoformat(rec["created_at"].replace("Z", "+00:00"))
    assert prov["data_age_s"] == pytest.approx((given - newest).total_seconds(), abs=1e-3)
    assert timedelta(hours=20) < given - newest < timedelta(days=1)
    assert {f["pm"] for f in prov["fits"]} == {"PCDC", "FullMesh"}
    assert all(f["r2"] > 0.9 and f["gate_passed"] for f in prov["fits"])
    assert not [f for f in rec["quality_flags"] if f.startswith("quality_gate_failed")]
    stored = client.get(f"/recommendations/{rec['id']}").json()
    assert stored == rec


def test_tables_2_to_4_for_a_calibrated_topology(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seeded = seed_srl_hu(db_session, topo["id"])
    t2 = client.get(f"/topologies/{topo['id']}/impact-factors").json()
    assert t2["campaign_id"] == seeded["campaign"].id
    assert len(t2["rows"]) == 6 and set(t2["rows"][0]["omegas"]) == set(t2["subflows"])
    t3 = client.get(f"/topologies/{topo['id']}/pcdc-subsets").json()
    assert {row["cc"]: set(row["subset"]) for row in t3["rows"]} == TABLE3["SRL-HU"]
    vegas = next(row for row in t3["rows"] if row["cc"] == "vegas")
    assert vegas["same_as_fullmesh"] and vegas["standby"] == []
    t4 = client.get(f"/topologies/{topo['id']}/fits").json()
    assert {f["pm"] for f in t4["fits"]} == {"PCDC", "FullMesh"}
    for f in t4["fits"]:
        assert len(f["curves"]) == 6 and f["coefficients"] and 0.9 < f["r2"] <= 1
    other = client.get(f"/topologies/{topo['id']}/fits", params={"campaign_id": 2**31 - 1})
    assert other.status_code == 404


def test_bad_input_is_422_with_the_field_path(client, auth):
    cases = [
        ({"topology_id": 1, "delta": 1.5}, ["body", "delta"]),
        ({"topology_id": 0}, ["body", "topology_id"]),
        (
            {"topology": {"local": SRL, "remote": {**HU, "isps": []}}},
            ["body", "topology", "remote", "isps"],
        ),
        ({"topology": {"local": SRL, "remote": HU, "rtts_ms": {"K-C": -1}}},
         ["body", "topology", "rtts_ms", "K-C"]),
    ]
    for body, loc in cases:
        r = client.post("/recommendations", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
        assert any(e["loc"][: len(loc)] == loc for e in r.json()["errors"]), r.text
    both = client.post("/recommendations", json={}, headers=auth)
    assert both.status_code == 422
    unknown_sf = client.post(
        "/recommendations",
        json={"topology": {"local": SRL, "remote": HU, "rtts_ms": {"X-Y": 10}}}, headers=auth)
    assert unknown_sf.status_code == 422
    assert unknown_sf.json()["errors"][0]["loc"] == ["body", "topology", "rtts_ms", "X-Y"]


def test_unknown_topology_is_404_and_conflicting_inline_site_is_409(client, auth):
    assert client.post("/recommendations", json={"topology_id": 2**31 - 1},
                       headers=auth).status_code == 404
    assert client.post("/sites", json=SRL, headers=auth).status_code == 201
    changed = {**SRL, "isps": SRL["isps"][:2]}
    r = client.post("/recommendations", json={"topology": {"local": changed, "remote": HU}},
                    headers=auth)
    assert r.status_code == 409, r.text
    assert r.json()["loc"] == ["body", "topology", "local"]


def test_writes_need_a_token(client):
    r = client.post("/recommendations", json={"topology_id": 1})
    assert r.status_code == 401
    r = client.post("/recommendations", json={"topology_id": 1},
                    headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401


def test_a_finished_campaign_whose_solve_fails_queues_no_other(client, auth, db_session):
    from sqlalchemy import func, select

    from models import Campaign, FitRecord
    from service.flows.campaign.finish import finish_campaign
    from service.store import campaigns
    from tests.conftest import new_campaign

    topo = post_topology(client, auth, UIT, HAW)
    campaign = new_campaign(db_session, topo["id"], ccs=["cubic"], runs=1, duration_s=5,
                            buffer_grid_mib=[1.0, 2.0, 3.0], model_kind="paper")
    campaigns.set_state(db_session, campaign_id=campaign.id, state="running")
    # A fit whose curve never reaches a positive throughput: the solver refuses it.
    db_session.add(FitRecord(
        campaign_id=campaign.id, pm="FullMesh", model_kind="paper", n=3, r2=0.0,
        curves=[{"cc": "cubic", "a": -1.0, "b": 0.0, "c": 0.0}], coefficients=[],
        gate_passed=False, warnings=[],
    ))
    db_session.flush()
    rec_id = finish_campaign(db_session, campaign_id=campaign.id).recommendation_id
    db_session.commit()
    rec = client.get(f"/recommendations/{rec_id}").json()
    assert rec["kind"] == "provisional" and rec["campaign_id"] is None
    assert any(f.startswith("calibration_unusable") for f in rec["quality_flags"])
    count = db_session.scalar(
        select(func.count(Campaign.id)).where(Campaign.topology_id == topo["id"])
    )
    assert count == 1 and db_session.get(Campaign, campaign.id).state == "done"
