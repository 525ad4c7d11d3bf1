"""Campaigns, idempotent measurements, pagination, raw output, and the token rules."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from models import ApiToken, Measurement
from service.flows.campaign import recording
from service.settings import Settings
from service.store import campaigns, tokens
from service.store.measurements import MeasurementRecord
from tests.builders import post_topology
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import probe_times

pytestmark = pytest.mark.postgres


def _topology(client, auth) -> int:
    """A stored topology with no campaign yet (a provisional answer would queue one)."""
    return post_topology(client, auth, SRL, HU)["id"]


def test_campaign_create_progress_and_cancel(client, auth):
    topology_id = _topology(client, auth)
    body = {"topology_id": topology_id, "ccs": ["cubic", "hybla"], "pms": ["PCDC"],
            "buffer_grid_mib": [1, 2, 4, 8], "runs": 2, "duration_s": 5,
            "mode": "grid"}
    r = client.post("/campaigns", json=body, headers=auth)
    assert r.status_code == 202, r.text
    c = r.json()
    # impact: 2 CCs x 2 runs x (1 + 8 subflows); buffer: 1 PM x 2 CCs x 4 sizes x 2 runs
    assert c["probes_total"] == 2 * 2 * 9 + 1 * 2 * 4 * 2
    assert c["state"] == "queued" and c["buffer_grid_mib"] == [1, 2, 4, 8]
    r = client.post(f"/campaigns/{c['id']}/cancel", headers=auth)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert r.json()["finished_at"] is not None
    assert client.get("/campaigns", params={"state": "cancelled"}).json()["total"] >= 1
    bad = client.post("/campaigns", json={**body, "ccs": ["Not A CC"]}, headers=auth)
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"][:2] == ["body", "ccs"]
    assert client.post("/campaigns/2147483647/cancel", headers=auth).status_code == 404


def test_done_campaign_cannot_be_cancelled(client, auth, db_session):
    topology_id = _topology(client, auth)
    c = new_campaign(db_session, topology_id, runs=1, duration_s=1)
    campaigns.set_state(db_session, campaign_id=c.id, state="running")
    campaigns.set_state(db_session, campaign_id=c.id, state="done")
    db_session.commit()
    assert client.post(f"/campaigns/{c.id}/cancel", headers=auth).status_code == 409


def test_measurements_are_idempotent_and_paginated(client, auth, db_session):
    topology_id = _topology(client, auth)
    c = new_campaign(db_session, topology_id, ccs=["cubic"], runs=1, duration_s=2)
    key = {"phase": "buffer", "pm": "pcdc", "cc": "Cubic", "run": 0}
    for k in range(5):
        _row, created = recording.record(
            db_session, MeasurementRecord(
            campaign_id=c.id, **key, bs_mib=0.5 * (k + 1), subflows=["K-C"],
            duration_s=2,
            goodput_mbps=[1.0 + k, 3.0 + k], tool="iperf3", tool_version="3.12",
            raw_output=f'{{"run": {k}}}', **probe_times(),
            subflow_bytes={"K-C": 1000 * k}),
        )
        assert created
    # Re-executing a task: same key, nothing new, progress unchanged.
    again, created = recording.record(
        db_session, MeasurementRecord(
            campaign_id=c.id, **key, bs_mib=0.5, subflows=["K-C"], duration_s=2,
        goodput_mbps=[99.0], tool="iperf3", **probe_times(0)),
    )
    db_session.commit()
    assert not created and again.goodput_mbps == [1.0, 3.0]
    count = db_session.scalar(
        select(func.count(Measurement.id)).where(Measurement.campaign_id == c.id)
    )
    assert count == 5
    got = client.get(f"/campaigns/{c.id}").json()
    assert got["probes_done"] == 5 and got["probe_seconds_used"] == 10.0
    page1 = client.get("/measurements", params={"campaign_id": c.id, "limit": 2}).json()
    page3 = client.get("/measurements",
                       params={"campaign_id": c.id, "limit": 2, "offset": 4}).json()
    assert page1["total"] == 5 and len(page1["items"]) == 2 and len(page3["items"]) == 1
    first = page1["items"][0]
    assert first["pm"] == "PCDC" and first["cc"] == "cubic" and first["excluded_subflow"] is None
    assert first["mean_goodput_mbps"] == 2.0 and "raw_output" not in first
    detail = client.get(f"/measurements/{first['id']}").json()
    assert detail["raw_output"] == '{"run": 0}' and detail["tool_version"] == "3.12"
    by_topology = client.get("/measurements", params={"topology_id": topology_id}).json()
    assert by_topology["total"] == 5
    assert client.get("/measurements", params={"limit": 0}).status_code == 422
    assert client.get("/measurements", params={"pm": "nope"}).status_code == 422
    assert client.get("/measurements/2147483647").status_code == 404


def test_tokens_are_stored_hashed_and_can_be_revoked(client, db_session, token, auth):
    rows = list(db_session.scalars(select(ApiToken)))
    assert rows and all(token not in (r.token_hash, r.name) for r in rows)
    assert any(r.token_hash == tokens.hash_token(token) for r in rows)
    assert client.post("/sites", json=SRL, headers=auth).status_code == 201
    tokens.revoke_token(db_session, name="tests")
    db_session.commit()
    assert client.post("/sites", json=HU, headers=auth).status_code == 401


def test_reads_need_a_token_when_configured(pg_database_url, session_factory, auth, tmp_path):
    settings = Settings(database_url=pg_database_url, data_dir=tmp_path, reads_need_token=True,
                        run_campaigns=False,
                        _env_file=None)
    with TestClient(create_app(settings, session_factory=session_factory),
                    base_url="http://localhost") as c:
        assert c.get("/sites").status_code == 401
        assert c.get("/sites", headers=auth).status_code == 200
        assert c.get("/health", headers=auth).json()["reads_need_token"] is True
