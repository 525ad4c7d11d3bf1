"""The objective is part of the question: a stream asked over the API is validated, stored with
its campaign and answer, answered by p99 frame delay from a stream campaign's paced probes, and
never mixed with a bulk answer (in the database or the cache)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from models import Campaign, Recommendation
from probes.frames import FrameStats
from service.algorithm.objective import Objective
from service.flows import recording
from service.flows.derive import fit_from_runs
from service.store import campaigns, results
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign

from .calibration import seed_srl_hu
from .conftest import HU, SRL
from .test_recommendations import _topology

pytestmark = pytest.mark.postgres

STREAM = {"kind": "stream", "bitrate_mbps": 8, "delay_budget_ms": 150}
GRID = [0.25, 0.5, 1.0, 2.0]


def truth(cc: str, bs: float) -> tuple[float, float]:
    """(goodput, p99 ms): cubic carries 8 Mbit/s from 0.5 MiB and bloats with the buffer; bbr
    carries it from 1 MiB with a short queue."""
    if cc == "cubic":
        return (8.0 if bs >= 0.5 else 6.0), 60 + 40 * bs
    return (8.0 if bs >= 1.0 else 5.0), 70.0 - 2 * bs


def seed_stream(session, topology_id: int) -> Campaign:
    """A finished stream campaign: paced buffer probes whose stored results carry frames."""
    objective = Objective.model_validate(STREAM)
    campaign = new_campaign(session, topology_id, ccs=["cubic", "bbr"], pms=["FullMesh"],
                            buffer_grid_mib=GRID, runs=2, duration_s=5, mode="grid",
                            objective=objective)
    campaigns.set_state(session, campaign_id=campaign.id, state="running")
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    n = 0
    for cc in ("cubic", "bbr"):
        for bs in GRID:
            for run in range(2):
                gp, p99 = truth(cc, bs)
                p99 += 0.5 * run
                frames = FrameStats(frames_sent=125, frames_received=125, frames_lost=0,
                                    lost_fraction=0.0, delay_p99_ms=p99, delay_p50_ms=p99 - 5)
                start = t0 + timedelta(seconds=10 * n)
                recording.record(session, MeasurementRecord(
                    campaign_id=campaign.id, phase="buffer", pm="FullMesh", cc=cc, bs_mib=bs,
                    run=run, subflows=["U-C"], duration_s=5, goodput_mbps=[gp] * 4,
                    tool="mpcoa-paced", tool_version="1",
                    raw_output=json.dumps({"frames": frames.model_dump(mode="json")}),
                    started_at=start, finished_at=start + timedelta(seconds=5)))
                n += 1
    results.store_fits(session, campaign_id=campaign.id,
                       fits=fit_from_runs(session, campaign=campaign).fits)
    campaigns.set_state(session, campaign_id=campaign.id, state="done")
    session.commit()
    return campaign


def ask(client, auth, topology_id, **extra):
    return client.post("/recommendations",
                       json={"topology_id": topology_id, "delta": 0.07, **extra}, headers=auth)


@pytest.mark.parametrize(("objective", "says"), [
    ({"kind": "stream"}, "a stream needs bitrate_mbps"),
    ({"kind": "bulk", "bitrate_mbps": 8}, "only for kind 'stream'"),
    ({"kind": "stream", "bitrate_mbps": 8, "frame_size_bytes": 1000}, "give bitrate_mbps"),
    ({"kind": "stream", "bitrate_mbps": 0.001}, "frames of 5 bytes"),
    ({"kind": "video"}, "bulk"),
])
def test_a_bad_objective_is_a_clear_422(client, auth, objective, says):
    topo = _topology(client, auth, SRL, HU)
    r = ask(client, auth, topo["id"], objective=objective)
    assert r.status_code == 422, r.text
    assert says in r.text


def test_a_stream_question_queues_a_stream_campaign(client, auth, db_session):
    topo = _topology(client, auth, SRL, HU)
    r = ask(client, auth, topo["id"], objective=STREAM)
    assert r.status_code == 202, r.text
    answer = r.json()
    assert answer["objective"] == STREAM and answer["provisional"]
    camp = client.get(answer["poll_url"], headers=auth).json()
    assert camp["objective"] == STREAM and camp["mode"] == "grid"
    row = db_session.get(Campaign, camp["id"])
    assert row.objective_key == "stream:25Hz:40000B:budget=150:loss=0.01"
    assert db_session.get(Recommendation, answer["id"]).inputs["objective"] == STREAM


def test_a_stream_is_answered_by_p99_frame_delay_and_never_mixed_with_bulk(
        client, auth, db_session):
    topo = _topology(client, auth, SRL, HU)
    bulk_campaign = seed_srl_hu(db_session, topo["id"])["campaign"]
    stream_campaign = seed_stream(db_session, topo["id"])
    r = ask(client, auth, topo["id"], objective=STREAM)
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["campaign_id"] == stream_campaign.id and s["objective"] == STREAM
    # bbr carries from 1 MiB: p99 68.25 (1), 66.25 (2); cubic 80.25 at 0.5 MiB at best
    assert (s["opm"], s["occ"], s["obs_mib"]) == ("FullMesh", "bbr", 1.0)
    st = s["stream"]
    assert st["p99_ms"] == pytest.approx(68.25) and st["best_p99_ms"] == pytest.approx(66.25)
    lo, hi = st["p99_interval_ms"]
    assert lo < 68.25 < hi and st["confidence"] == 0.9
    assert s["otp_mbps"] == pytest.approx(8.0) and st["carrying"] == ["FullMesh/bbr",
                                                                     "FullMesh/cubic"]
    # the same stream spelt by frames is the same question: the same answer, from the cache
    again = ask(client, auth, topo["id"], objective={
        "kind": "stream", "frame_rate_hz": 25, "frame_size_bytes": 40000,
        "delay_budget_ms": 150})
    assert again.status_code == 200 and again.json()["id"] != 0
    assert again.json()["stream"]["p99_ms"] == st["p99_ms"]
    # bulk: the bulk campaign's answer, not the stream's, and no stream figures
    b = ask(client, auth, topo["id"])
    assert b.status_code == 200, b.text
    assert b.json()["campaign_id"] == bulk_campaign.id and b.json()["stream"] is None
    assert b.json()["objective"] == {"kind": "bulk"}
    # another stream (no budget) is another question: no calibrated answer for it yet
    other = ask(client, auth, topo["id"], objective={"kind": "stream", "bitrate_mbps": 8})
    assert other.status_code == 202


def test_the_answer_page_shows_the_objective_and_the_frame_delay(client, auth, db_session):
    topo = _topology(client, auth, SRL, HU)
    seed_stream(db_session, topo["id"])
    rec = ask(client, auth, topo["id"], objective=STREAM).json()
    page = client.get(f"/dashboard/recommendations/{rec['id']}", headers=auth)
    assert page.status_code == 200, page.text[:300]
    assert "Objective: stream of 8.00 Mbit/s" in page.text or "Objective: stream of 8" in page.text
    assert "p99 frame delay at OBS" in page.text and "68.2" in page.text


def test_the_campaign_page_shows_frame_delay_per_arm(client, auth, db_session):
    topo = _topology(client, auth, SRL, HU)
    campaign = seed_stream(db_session, topo["id"])
    page = client.get(f"/dashboard/campaigns/{campaign.id}", headers=auth)
    assert page.status_code == 200, page.text[:300]
    assert "stream of 8" in page.text and "Frame delay per arm and buffer" in page.text
    assert "So far: FullMesh / bbr at 1.000 MiB, p99 68.2 ms" in page.text
