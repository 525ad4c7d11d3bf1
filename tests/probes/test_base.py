"""Probe interface types: validation and the JSON round trip used for storage."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from probes.base import MeasurementRequest, MeasurementResult, TrafficProfile
from probes.sstats import parse_ss_msk, parse_ss_subflows

DATA = Path(__file__).parent / "data"


def test_request_validation():
    with pytest.raises(ValidationError, match="receiver"):
        MeasurementRequest(sender="A", receiver="A")
    with pytest.raises(ValidationError, match="allowed_subflows"):
        MeasurementRequest(sender="A", receiver="B", allowed_subflows=[])
    with pytest.raises(ValidationError):
        MeasurementRequest(sender="A", receiver="B", allowed_subflows=["U;D"])
    with pytest.raises(ValidationError):
        MeasurementRequest(sender="A", receiver="B", cc="cubic; reboot")
    with pytest.raises(ValidationError, match="paced"):
        TrafficProfile(kind="paced", frame_rate_hz=25)
    assert TrafficProfile.paced(25, 20000).rate_bps == 4_000_000


def test_result_roundtrip():
    req = MeasurementRequest(sender="A", receiver="B", allowed_subflows=["U-D"], cc="reno",
                             buffer_bytes=1 << 20, duration_s=3,
                             profile=TrafficProfile.paced(25, 20000), path_manager="pcdc")
    res = MeasurementResult(
        request=req, tool="iperf3", tool_version="3.12",
        goodput_series=[(1.0, 9.5), (2.0, 9.7)], goodput_mbps=9.6, bytes_received=3600000,
        subflow_bytes={"U-D": 3600000, "T-D": 1}, backup_subflows=["T-D"],
        effective_buffers={"sender_sndbuf": 2 << 20, "receiver_rcvbuf": None},
        kernel={"release": "6.18"}, mptcp_settings={"sender": {"endpoints": []}},
        started_at=datetime(2026, 1, 1, tzinfo=UTC), ended_at=datetime(2026, 1, 1, 0, 0, 3,
                                                                        tzinfo=UTC),
        mptcp_ok=True, subflow_count=2, raw={"x": "y"})
    d = json.loads(json.dumps(res.to_dict()))
    back = MeasurementResult.from_dict(d)
    assert back == res
    assert back.subflow_share("T-D") < 1e-6


def test_ss_parsers_on_real_output():
    """ss -tin / -Min as printed by this kernel during a 2 x 2 iperf3 run (control + data)."""
    sfs = parse_ss_subflows((DATA / "ss_tin.txt").read_text())
    msks = parse_ss_msk((DATA / "ss_min.txt").read_text())
    tokens = {m["token"] for m in msks}
    assert tokens == {"9058d174", "eb74e8ed"}
    data = [s for s in sfs if s["token"] == "9058d174"]
    assert len(data) == 4  # 2 x 2 subflows of the data connection
    assert {(s["local"], s["remote"]) for s in data} == {
        ("10.1.0.1", "10.2.0.1"), ("10.1.0.1", "10.2.1.1"), ("10.1.1.1", "10.2.0.1"),
        ("10.1.1.1", "10.2.1.1")}
    assert all(s["bytes_acked"] > 900_000 for s in data)
    assert all(s["rport"] == 5301 for s in sfs)
    m = next(m for m in msks if m["token"] == "9058d174")
    assert m["subflows"] == 3 and m["fallback"] is False


def test_ss_fallback_flag():
    text = ("ESTAB 0 0 10.1.0.1:1000 10.2.0.1:5201\n"
            "\t subflows:0 fallback remote_key token:abcd write_seq:1 snd_una:1 rcv_nxt:1\n")
    (m,) = parse_ss_msk(text)
    assert m["fallback"] is True and m["token"] == "abcd"
