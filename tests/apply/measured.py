"""A calibrated answer that probes measured, for the tests that apply one: its campaign, done,
with one probe run at the largest buffer (what an apply's buffer is bounded by)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from models import Recommendation, utcnow
from service.store import campaigns, measurements, recommendations


def measured_answer(session, topology_id: int, *, largest_mib: float = 4.0,
                    **answer: Any) -> Recommendation:
    """`answer`: the recommendation's columns (opm, occ, obs_mib, outputs, ...) over defaults."""
    campaign = campaigns.add_campaign(
        session, topology_id=topology_id, ccs=["reno"], pms=["PCDC"],
        buffer_grid_mib=[largest_mib], runs=1, duration_s=3.0, delta=0.07, model_kind="paper",
        probe_seconds_budget=None, probes_total=1, reason="manual")
    campaign.state = "done"
    now = utcnow()
    measurements.record_measurement(session, measurements.MeasurementRecord(
        campaign_id=campaign.id, phase="buffer", pm="PCDC", cc="reno", bs_mib=largest_mib,
        run=0, subflows=["U-C"], duration_s=3.0, goodput_mbps=[7.0, 7.0, 7.0], tool="iperf3",
        started_at=now - timedelta(seconds=3), finished_at=now))
    values = {"delta": 0.07, "bs_min_mib": 0.0625, "bs_max_mib": largest_mib, "inputs": {},
              "opm": "PCDC", "occ": "reno", "obs_mib": 0.5, "otp_mbps": 7.0,
              "tp_max_mbps": 7.5, "traditional": {}, "provenance": {}, "outputs": {}}
    rec = recommendations.add_recommendation(
        session, topology_id=topology_id, campaign_id=campaign.id, kind="calibrated",
        **{**values, **answer})
    campaign.recommendation_id = rec.id
    session.flush()
    return rec
