"""Scheduled recalibration (cron per topology), the calibration history and change events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from models import Campaign, ImpactFactor, Recommendation, utcnow
from models.history import RecalibrationSchedule
from service.flows.answers.recommend import recommend
from service.flows.campaign.recalibration_events import record_events
from service.flows.scheduling.recalibration import queue_due_campaigns
from service.settings import Settings
from service.store import schedules
from tests.builders import post_topology

from .calibration import seed_srl_hu
from .conftest import HAW, HU, SRL, UIT

pytestmark = pytest.mark.postgres


def test_schedule_crud_and_validation(client, auth):
    topo = post_topology(client, auth, SRL, HU)
    url = f"/topologies/{topo['id']}/schedule"
    assert client.get(url).status_code == 404
    assert client.put(url, json={"cron": "0 3 * * *"}).status_code == 401
    for bad in ({"cron": "every day"}, {"cron": "61 * * * *"}, {"cron": "* * * * * *"},
                {"cron": "0 3 * * *", "parameters": {"runs": 0}},
                {"cron": "0 3 * * *", "parameters": {"ccs": ["Cubic; rm -rf /"]}},
                {"cron": "0 3 * * *", "extra": 1}):
        r = client.put(url, json=bad, headers=auth)
        assert r.status_code == 422, (bad, r.text)
    r = client.put(url, json={"cron": "0  3 * * *", "parameters": {"runs": 2, "ccs": ["reno"]}},
                   headers=auth)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cron"] == "0 3 * * *" and body["parameters"] == {
        "runs": 2, "ccs": ["reno"], "delta": 0.07}  # the model kind: the settings' at run time
    assert body["next_run_at"].endswith(("03:00:00Z", "03:00:00+00:00"))
    assert client.get(url).json()["cron"] == "0 3 * * *"
    assert client.put("/topologies/999999/schedule", json={"cron": "0 3 * * *"},
                      headers=auth).status_code == 404
    assert client.delete(url, headers=auth).status_code == 204
    assert client.get(url).status_code == 404


def test_due_schedule_queues_one_campaign_at_a_time(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    row = schedules.set_schedule(
        db_session, topology_id=topo["id"], cron="*/5 * * * *", parameters={"runs": 1}
    )
    settings = Settings(run_campaigns=False)
    db_session.commit()
    not_yet = row.created_at - timedelta(seconds=1)
    assert queue_due_campaigns(db_session, settings=settings, now=not_yet) == []
    due = schedules.next_run(row) + timedelta(seconds=1)
    (cid,) = queue_due_campaigns(db_session, settings=settings, now=due)
    campaign = db_session.get(Campaign, cid)
    assert (campaign.reason, campaign.runs, campaign.state) == ("scheduled", 1, "queued")
    # Due again later, but the topology's campaign is still active: nothing more is queued.
    later = due + timedelta(hours=1)
    assert queue_due_campaigns(db_session, settings=settings, now=later) == []
    assert client.get(f"/topologies/{topo['id']}/schedule").json()["last_campaign_id"] == cid


def test_history_and_change_events_between_calibrations(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    first = seed_srl_hu(db_session, topo["id"], seed=1)["campaign"]
    old_obs = recommend(
        db_session, topology_id=topo["id"], queue_campaign=False
    ).recommendation.obs_mib
    second = seed_srl_hu(db_session, topo["id"], seed=2)["campaign"]
    rec = recommend(db_session, topology_id=topo["id"], queue_campaign=False).recommendation
    assert rec.campaign_id == second.id
    # The second calibration came out differently: another CC, a buffer 20 % larger, and one
    # impact factor that changed sign.
    rec.occ, rec.obs_mib = "olia", old_obs * 1.2
    flipped = db_session.scalar(select(ImpactFactor).where(
        ImpactFactor.campaign_id == second.id, ImpactFactor.cc == "cubic",
        ImpactFactor.subflow == "P-C"))
    flipped.omega = -flipped.omega
    db_session.commit()

    events = record_events(db_session, campaign=second)
    db_session.commit()
    kinds = {(e.kind, e.subject) for e in events}
    assert kinds == {("occ_changed", "occ"), ("obs_moved", "obs_mib"),
                     ("omega_sign_changed", "cubic/P-C")}
    moved = next(e for e in events if e.kind == "obs_moved")
    assert moved.change_pct == pytest.approx(20.0)
    assert all(e.previous_campaign_id == first.id for e in events)

    listed = client.get(f"/topologies/{topo['id']}/events").json()
    assert {(e["kind"], e["subject"]) for e in listed} == kinds
    history = client.get(f"/topologies/{topo['id']}/history").json()
    assert [h["campaign_id"] for h in history] == [second.id, first.id]
    assert history[0]["occ"] == "olia"
    first_rec = db_session.scalar(select(Recommendation).where(
        Recommendation.campaign_id == first.id))
    assert history[1]["occ"] == first_rec.occ == "hybla"
    # nothing noticed a path change and nothing was re-applied: said as such
    assert [(h["noticed_at"], h["reapply"]) for h in history] == [(None, None)] * 2
    assert client.get("/topologies/999999/events").status_code == 404


# --- issue 14, item 3: a cron that never fires ----------------------------------------------------
def test_a_cron_that_never_fires_is_422_and_not_stored(client, auth):
    topo = post_topology(client, auth, SRL, HU)
    url = f"/topologies/{topo['id']}/schedule"
    for never in ("0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *"):
        r = client.put(url, json={"cron": never}, headers=auth)
        assert r.status_code == 422, (never, r.text)
        assert r.json()["errors"][0]["loc"] == ["body", "cron"]
        assert "never fires" in r.json()["errors"][0]["msg"]
    assert client.get(url).status_code == 404


def test_beat_skips_a_failing_schedule_and_queues_the_others(client, auth, db_session, caplog):
    bad = post_topology(client, auth, SRL, HU)
    good = post_topology(client, auth, UIT, HAW)
    settings = Settings(run_campaigns=False)
    for topo in (bad, good):
        schedules.set_schedule(db_session, topology_id=topo["id"], cron="*/5 * * * *",
                               parameters={"runs": 1})
    db_session.flush()
    # A row stored before the cron was checked (or edited in the database): never fires.
    row = db_session.scalar(select(RecalibrationSchedule).where(
        RecalibrationSchedule.topology_id == bad["id"]))
    row.cron = "0 0 31 2 *"
    db_session.commit()
    due = utcnow() + timedelta(days=1)
    queued = queue_due_campaigns(db_session, settings=settings, now=due)
    db_session.commit()
    assert len(queued) == 1
    assert db_session.get(Campaign, queued[0]).topology_id == good["id"]
    assert f"recalibration of topology {bad['id']} skipped" in caplog.text


# --- issue 14, item 5: a plan's size -------------------------------------------------------------
HUGE_PLAN = {"ccs": [f"cc{k}" for k in range(16)], "runs": 100, "duration_s": 3600,
             "buffer_grid_mib": [0.5 * k for k in range(1, 401)]}


def test_a_plan_too_large_is_422_for_campaigns_and_schedules(client, auth):
    topo = post_topology(client, auth, SRL, HU)
    r = client.post("/campaigns", json={"topology_id": topo["id"], **HUGE_PLAN}, headers=auth)
    assert r.status_code == 422, r.text
    assert "probes" in r.json()["errors"][0]["msg"] and "at most" in r.json()["errors"][0]["msg"]
    long_probes = {"runs": 9, "duration_s": 3600}  # the paper's plan at an hour per probe
    r = client.put(f"/topologies/{topo['id']}/schedule",
                   json={"cron": "0 3 * * *", "parameters": long_probes}, headers=auth)
    assert r.status_code == 422, r.text
    assert client.get(f"/topologies/{topo['id']}/schedule").status_code == 404
    assert client.get("/campaigns", params={"topology_id": topo["id"]}).json()["total"] == 0
    ok = {"topology_id": topo["id"], "ccs": ["cubic"], "runs": 1, "duration_s": 1,
          "buffer_grid_mib": [1, 2, 4]}
    assert client.post("/campaigns", json=ok, headers=auth).status_code == 202
