"""The fallbacks the health gate counts: the topology's newest probes that fell back to TCP
one after another, read from what each probe stored (its result's `mptcp_ok`)."""

from __future__ import annotations

import json
from datetime import timedelta

from models import utcnow
from service.store import campaigns, measurements
from service.store.inventory import ensure_topology
from tests.apply import livebed


def _probe(session, campaign_id: int, run: int, ago_s: float, mptcp_ok: bool | None) -> None:
    end = utcnow() - timedelta(seconds=ago_s)
    raw = "" if mptcp_ok is None else json.dumps(
        {"mptcp_ok": mptcp_ok, "fallback_reason": None if mptcp_ok else f"fell back {run}"})
    measurements.record_measurement(session, measurements.MeasurementRecord(
        campaign_id=campaign_id, phase="impact", pm="FullMesh", cc="cubic", bs_mib=0.0,
        run=run, subflows=[], duration_s=3.0, goodput_mbps=[1.0], tool="iperf3",
        started_at=end - timedelta(seconds=3), finished_at=end, raw_output=raw,
        status="ok" if mptcp_ok is not False else "failed"))


def test_the_streak_is_the_newest_fallbacks_in_a_row_within_the_window(db_session):
    tid = ensure_topology(db_session, spec=livebed.topology()).id
    campaign = campaigns.add_campaign(
        db_session, topology_id=tid, ccs=["cubic"], pms=["FullMesh"], buffer_grid_mib=[1.0],
        runs=1, duration_s=3.0, delta=0.07, model_kind="paper", probe_seconds_budget=None,
        probes_total=1, reason="manual")
    for run, ago, ok in ((1, 500, False), (2, 400, True), (3, 300, False), (4, 200, False),
                         (5, 100, False)):
        _probe(db_session, campaign.id, run, ago, ok)
    since = utcnow() - timedelta(seconds=3600)
    streak = measurements.fallback_streak(db_session, topology_id=tid, since=since, limit=10)
    assert streak == ["fell back 5", "fell back 4", "fell back 3"]  # run 2 kept MPTCP
    assert measurements.fallback_streak(db_session, topology_id=tid, since=since,
                                        limit=2) == ["fell back 5", "fell back 4"]
    recent = utcnow() - timedelta(seconds=250)
    assert measurements.fallback_streak(db_session, topology_id=tid, since=recent,
                                        limit=10) == ["fell back 5", "fell back 4"]
    # a probe stored without its result does not count as one that fell back
    _probe(db_session, campaign.id, 6, 10, None)
    assert measurements.fallback_streak(db_session, topology_id=tid, since=since,
                                        limit=10) == []
