"""Probe interface types: validation and the JSON round trip used for storage."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from probes.base import (
    MeasurementRequest,
    MeasurementResult,
    ObservedSubflow,
    TrafficProfile,
    mean_after_warmup,
)
from probes.tools.sstats import parse_ss_msk, parse_ss_subflows

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
                             profile=TrafficProfile.paced(25, 20000), path_manager="PCDC")
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


def test_path_manager_vocabulary_is_the_services():
    assert MeasurementRequest(sender="A", receiver="B").path_manager == "FullMesh"
    assert MeasurementRequest(sender="A", receiver="B", path_manager="PCDC").path_manager == "PCDC"
    # the old lower-case spelling is read as the canonical one
    assert MeasurementRequest(sender="A", receiver="B", path_manager="pcdc").path_manager == "PCDC"
    with pytest.raises(ValidationError, match="path_manager"):
        MeasurementRequest(sender="A", receiver="B", path_manager="ndiffports")


def test_warmup_default_and_validation():
    assert MeasurementRequest(sender="A", receiver="B", duration_s=10).warmup_s == 2.0
    assert MeasurementRequest(sender="A", receiver="B", duration_s=3).warmup_s == 1.5
    assert MeasurementRequest(sender="A", receiver="B", duration_s=5, warmup_s=0).warmup_s == 0
    with pytest.raises(ValidationError, match="warmup_s"):
        MeasurementRequest(sender="A", receiver="B", duration_s=3, warmup_s=3)
    with pytest.raises(ValidationError, match="warmup_s"):
        MeasurementRequest(sender="A", receiver="B", warmup_s=-1)


def test_mean_after_warmup():
    series = [(1.0, 2.0), (2.001, 8.0), (3.0, 10.0), (3.5, 12.0)]
    assert mean_after_warmup(series, 0.0) == pytest.approx((2 + 8.0 * 1.001 + 10 * 0.999 + 6)
                                                           / 3.5)
    # the interval (2.001, 3.0] starts after a 2 s warm-up (within the tools' drift)
    assert mean_after_warmup(series, 2.0) == pytest.approx((10 * 0.999 + 12 * 0.5) / 1.499)
    assert mean_after_warmup(series, 5.0) is None


def result_with(observed, allowed=None, expected=("U-D", "U-O", "T-D", "T-O"), **kw):
    req = MeasurementRequest(sender="A", receiver="B", duration_s=3, allowed_subflows=allowed,
                             **kw)
    return MeasurementResult(
        request=req, tool="iperf3", tool_version="3.12", goodput_series=[(1, 1), (2, 1), (3, 1)],
        expected_subflows=list(expected), observed_subflows=observed, mptcp_ok=True,
        started_at=datetime(2026, 1, 1, tzinfo=UTC), ended_at=datetime(2026, 1, 1, tzinfo=UTC))


def sf(name, backup=False, acked=1_000_000, retrans=0):
    return ObservedSubflow(name=name, backup=backup, bytes_acked=acked, bytes_retrans=retrans)


def test_subflow_set_as_requested_passes():
    ok = result_with([sf("U-D"), sf("T-O"), sf("U-O", True, 1), sf("T-D", True, 1)],
                     allowed=["U-D", "T-O"])
    assert ok.subflow_set_problems() == [] and ok.failure_reason() is None
    full = result_with([sf(n) for n in ("U-D", "U-O", "T-D", "T-O")])
    assert full.subflow_set_problems() == []


def test_subflow_set_problems_name_each_difference():
    r = result_with([sf("U-D"), sf("T-O", acked=1), sf("U-O", False, 1), sf("T-D", True, 60_000),
                     sf("X-Y")], allowed=["U-D", "T-O"])
    assert r.subflow_set_problems() == [
        "subflow X-Y: seen but not a subflow of this pair",
        "subflow U-O: excluded but not in backup",
        "subflow T-D: excluded but carried 60000 bytes (limit 4096)",
        "subflow T-O: allowed but carried no payload",
    ]
    missing = result_with([sf("U-D")], allowed=["U-D", "T-O"])
    assert "subflow T-O: allowed but not established" in missing.subflow_set_problems()
    assert "subflow U-O: excluded but not established" in missing.subflow_set_problems()
    # the absolute limit is configurable (argument, or MPCOA_EXCLUDED_MAX_BYTES)
    assert not any("T-D" in p for p in r.subflow_set_problems(max_excluded_bytes=100_000))


def test_the_thin_adsl_case_the_relative_check_missed():
    """SRL-HU: four fully used ADSL subflows are 0.85 % of the aggregate: under the old 1 %
    share, yet far over the absolute limit."""
    fast = [sf(n, acked=20_000_000) for n in ("K-C", "K-CU", "U-C", "U-CU")]
    adsl = [sf(n, True, 171_500) for n in ("P-C", "P-CU", "T-C", "T-CU")]
    r = result_with(fast + adsl, allowed=["K-C", "K-CU", "U-C", "U-CU"],
                    expected=[s.name for s in fast + adsl])
    assert sum(r.subflow_share(s.name) for s in adsl) < 0.01  # the old relative limit
    assert len(r.subflow_set_problems()) == 4


def test_data_reinjected_onto_a_backup_subflow_after_a_stall_passes():
    """Measured on shared.yaml (docs/testbed.md): D-U's ACKs blackholed 0.3 s mid-probe, one
    segment retransmitted on it and 23,185 bytes reinjected onto the backup D-T: an honest
    probe. Blackholed 1 s, the kernel sent on D-T instead, 939,561 of 4,448,015 bytes: a probe
    of another path."""
    pair = ("D-U", "D-T")
    honest = result_with([sf("D-U", acked=5_166_286, retrans=1424), sf("D-T", True, 23_185)],
                         allowed=["D-U"], expected=pair)
    assert honest.subflow_set_problems() == []
    took_over = result_with([sf("D-U", acked=3_508_454, retrans=4272),
                             sf("D-T", True, 939_561)], allowed=["D-U"], expected=pair)
    assert took_over.subflow_set_problems() == [
        f"subflow D-T: excluded but carried 939561 bytes (limit {int(0.05 * 4_448_015)})"]
    # no retransmission on the allowed subflow: nothing was reinjected, the absolute limit
    quiet = result_with([sf("D-U", acked=5_166_286), sf("D-T", True, 23_185)],
                        allowed=["D-U"], expected=pair)
    assert quiet.subflow_set_problems() == [
        "subflow D-T: excluded but carried 23185 bytes (limit 4096)"]
    # not in backup: the scheduler may send on it at will, the absolute limit
    active = result_with([sf("D-U", acked=5_166_286, retrans=1424), sf("D-T", False, 23_185)],
                         allowed=["D-U"], expected=pair)
    assert active.subflow_set_problems() == [
        "subflow D-T: excluded but not in backup",
        "subflow D-T: excluded but carried 23185 bytes (limit 4096)"]


def test_with_a_set_buffer_an_idle_allowed_subflow_is_the_buffer_not_a_fault():
    observed = [sf("U-D"), sf("U-O", acked=1), sf("T-D", acked=1), sf("T-O", acked=1)]
    autotuned = result_with(observed)
    assert "subflow U-O: allowed but carried no payload" in autotuned.subflow_set_problems()
    small = result_with(observed, buffer_bytes=16384)
    assert small.subflow_set_problems() == []


def test_a_paced_flow_need_not_use_every_allowed_subflow(monkeypatch):
    r = result_with([sf("U-D"), sf("U-O", acked=1), sf("T-D", acked=1), sf("T-O", acked=1)],
                    profile=TrafficProfile.paced(25, 2000))
    assert r.subflow_set_problems() == []
    monkeypatch.setenv("MPCOA_EXCLUDED_MAX_BYTES", "12x")
    with pytest.raises(ValueError, match="MPCOA_EXCLUDED_MAX_BYTES"):
        result_with([sf("U-D", True)], allowed=["U-O"]).subflow_set_problems()


def _buffered(buffer_bytes, *, tool="netperfmeter", effective=None, buffers_set=None):
    req = MeasurementRequest(sender="A", receiver="B", cc="cubic", buffer_bytes=buffer_bytes,
                             duration_s=8)
    return MeasurementResult(
        request=req, tool=tool, tool_version="2.0.10", goodput_series=[(4.0, 2.39), (8.0, 2.39)],
        goodput_mbps=2.39, effective_buffers=effective or {}, buffers_set=buffers_set or {},
        started_at=datetime(2026, 1, 1, tzinfo=UTC), ended_at=datetime(2026, 1, 1, tzinfo=UTC),
        mptcp_ok=True)


ENDS = ("sender_sndbuf", "sender_rcvbuf", "receiver_sndbuf", "receiver_rcvbuf")


def test_an_autotuned_probe_whose_tool_set_a_buffer_fails():
    """The live UNIS-HiN case: no buffer asked, NetPerfMeter set its default 233,016 bytes on
    every end, read back doubled as 466,032."""
    r = _buffered(None, effective=dict.fromkeys(ENDS, 466_032),
                  buffers_set=dict.fromkeys(ENDS, 233_016))
    why = r.failure_reason() or ""
    assert "buffer sender_sndbuf: netperfmeter set 233016 bytes, none was asked" in why
    assert len(r.buffer_problems()) == 4


def test_an_autotuned_probe_left_alone_passes():
    r = _buffered(None, effective={"sender_sndbuf": 2_500_000, "receiver_rcvbuf": 6_291_456},
                  buffers_set=dict.fromkeys(ENDS, 0))
    assert r.buffer_problems() == [] and r.failure_reason() is None


def test_a_buffer_read_back_other_than_asked_fails():
    asked = 1 << 20
    ok = _buffered(asked, tool="iperf3", effective=dict.fromkeys(ENDS, 2 * asked),
                   buffers_set=dict.fromkeys(ENDS, asked))
    assert ok.failure_reason() is None
    capped = _buffered(asked, tool="iperf3",
                       effective={**dict.fromkeys(ENDS, 2 * asked), "receiver_rcvbuf": 425_984},
                       buffers_set=dict.fromkeys(ENDS, asked))
    assert capped.buffer_problems() == [
        "buffer receiver_rcvbuf: read back 425984 bytes, 1048576 asked (Linux doubles it: "
        "2097152)"]
    unset = _buffered(asked, buffers_set=dict.fromkeys(ENDS, 233_016))
    assert "netperfmeter set 233016 bytes, 1048576 asked" in (unset.failure_reason() or "")
    unseen = _buffered(asked, effective={"sender_sndbuf": None})  # not seen: nothing to judge
    assert unseen.buffer_problems() == []
