"""A probe's mean a little above what its links carry is stored capped at their rate: the window
held a release of data sent before it (MPTCP's reorder queue). The series stays as measured."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models import Measurement, utcnow
from probes.base import MeasurementRequest, MeasurementResult
from service.flows.campaign import recording
from service.flows.campaign.plan import ProbeStep

from .test_artifacts import _campaign

pytestmark = pytest.mark.postgres


def _result(series: list[float]) -> MeasurementResult:
    now = utcnow()
    timed = [(float(k + 1), v) for k, v in enumerate(series)]
    return MeasurementResult(
        request=MeasurementRequest(sender="A", receiver="B", duration_s=len(series),
                                   warmup_s=2),
        tool="iperf3", tool_version="3.12", goodput_series=timed, mptcp_ok=True,
        goodput_mbps=sum(series[2:]) / len(series[2:]), warmup_s=2,
        started_at=now - timedelta(seconds=len(series)), ended_at=now)


@pytest.mark.parametrize(("series", "stored", "capped"), [
    # every subflow: two 12 Mbit/s uplinks, 24 together; the fourth second released a backlog
    ([20.0, 21.0, 22.0, 33.0, 22.0], 24.0 * 1428 / 1514, True),
    ([20.0, 21.0, 22.0, 22.0, 21.0], 21.667, False),  # within what the links carry
    ([20.0, 21.0, 40.0, 40.0, 40.0], 40.0, False),  # far beyond: the stated rates are wrong
])
def test_a_release_above_the_links_is_capped(client, auth, db_session, series, stored, capped):
    cid = _campaign(client, auth, db_session)
    step = ProbeStep(phase="buffer", pm="FullMesh", cc="cubic", bs_mib=1.0, run=1)
    row = recording.store_result(db_session, campaign_id=cid, step=step, result=_result(series))
    db_session.commit()
    row = db_session.get(Measurement, row.id)
    assert row.mean_goodput_mbps == pytest.approx(stored, abs=1e-3)
    assert row.goodput_mbps == series  # the measurement itself is kept
    if capped:
        assert row.timing["capped_at_links"]["links_mbps"] == pytest.approx(24.0)
        assert row.timing["capped_at_links"]["measured_mbps"] == pytest.approx(25.667, abs=1e-3)
    else:
        assert "capped_at_links" not in row.timing
