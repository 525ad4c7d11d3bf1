"""Per-frame evidence: real NetPerfMeter 2.0.10 per-message vectors turned into frames, and the
frame figures (delay percentiles, RFC 3550 jitter, late, head-of-line wait, lost)."""

from __future__ import annotations

import itertools

import pytest

from probes.clocksync import ClockOffset
from probes.frames import (
    FrameRecord,
    delay_cdf,
    frame_stats,
    frames_csv,
    goodput_series,
    hol_timeline,
    percentile,
    read_frames_csv,
    rfc3550_jitter,
)
from probes.tools.netperfmeter import (
    constant_frame_size,
    message_frames,
    parse_config,
    parse_flow_vector,
    parse_frames,
    read_text,
)
from tests.support import shared_fixtures

FIX = shared_fixtures("netperfmeter")
VIDEO = FIX / "mptcp-video-reno-1MiB"


def video_messages():
    return parse_flow_vector(read_text(VIDEO / "run-passive-00000000-0000.vec"))


def test_the_video_fixture_becomes_its_249_frames():
    """25 frames/s of 20,000 bytes for 10 s: the active side says 249 frames were sent; every
    one arrived (reliable MPTCP), each as two messages (16,000 + 4,000 bytes)."""
    frames, unit = parse_frames(VIDEO)
    assert unit == "frame"
    assert [f.seq for f in frames] == list(range(249))
    assert all(f.recv_us is not None and f.size_bytes == 20000 for f in frames)
    spacing = sorted(b.send_us - a.send_us for a, b in itertools.pairwise(frames))
    # 25 frames/s; NetPerfMeter's timer runs a little slow (40.3 ms median)
    assert spacing[len(spacing) // 2] == pytest.approx(40_000, rel=0.02)
    # the first frame's send time is the active side's "First Transmission"
    assert frames[0].send_us == 1795238289380116


def test_frame_delay_is_the_last_message_of_the_frame():
    frames, _ = parse_frames(VIDEO)
    rows = video_messages()
    # a frame ends at a message whose byte count is a multiple of the frame size
    ends = [r for r in rows if r["AbsBytes"] % 20000 == 0]
    assert len(ends) == 249
    for f, r in zip(frames, ends, strict=True):
        assert f.recv_us == r["AbsTime"]
        # both messages of a frame are sent together: its delay is the last message's Delay
        assert f.delay_ms == pytest.approx(r["Delay"], abs=0.06)


def test_the_fixture_figures():
    frames, _ = parse_frames(VIDEO)
    s = frame_stats(frames, budget_ms=40.0)
    assert (s.frames_sent, s.frames_received, s.frames_lost) == (249, 249, 0)
    # one core router adds 15 ms one way; a 20,000-byte frame takes a few ms more on 20 Mbit/s
    assert 15.0 < s.delay_min_ms < s.delay_p50_ms < 17.0
    assert s.delay_p50_ms <= s.delay_p95_ms <= s.delay_p99_ms <= s.delay_max_ms
    # the first two frames waited for the connection's start (47.6 ms): the only late ones
    assert s.delay_max_ms == pytest.approx(47.634, abs=0.001)
    assert s.late_frames == 2
    assert s.hol_max_ms == pytest.approx(s.delay_max_ms - s.delay_min_ms)
    # RFC 3550 jitter: the last J, its mean and its largest (the seeds report means and maxima)
    jit = rfc3550_jitter([f.delay_ms for f in frames])
    assert s.jitter_ms == jit[-1] and s.jitter_max_ms == max(jit)
    assert s.jitter_mean_ms == pytest.approx(sum(jit) / len(jit)) and s.jitter_mean_ms < max(jit)
    rel = frame_stats(frames, clock="relative")
    assert rel.delay_min_ms == 0 and rel.delay_p99_ms == pytest.approx(s.hol_p99_ms)


def test_rfc3550_jitter_reproduces_netperfmeters_column():
    """NetPerfMeter computes J per message; started from its first value, our estimator run
    over its Delay column gives its Jitter column (to the 3 printed decimals' rounding)."""
    rows = video_messages()
    delays = [r["Delay"] for r in rows]
    j = rows[0]["Jitter"]
    for prev, row in zip(delays, rows[1:], strict=False):
        j += (abs(row["Delay"] - prev) - j) / 16.0
        assert j == pytest.approx(row["Jitter"], abs=0.003)
    assert rfc3550_jitter([10.0, 10.0, 26.0])[-1] == pytest.approx(1.0)


def test_lost_frames_and_vbr_messages():
    rows = video_messages()[:9]  # frames 0-4 complete (the 9th row ends frame 4)
    frames, unit = message_frames(rows, 20000, frames_sent=8)
    assert unit == "frame" and len(frames) == 8
    assert [f.recv_us is None for f in frames] == [False] * 5 + [True] * 3
    assert frames[5].send_us - frames[4].send_us == pytest.approx(40_000, abs=300)
    assert frame_stats(frames).lost_fraction == pytest.approx(3 / 8)
    msgs, unit = message_frames(rows, None)
    assert unit == "message" and len(msgs) == 9


def test_constant_frame_size_from_the_config():
    cfg = parse_config(read_text(VIDEO / "run.config"))
    assert constant_frame_size(cfg) == 20000
    assert constant_frame_size({**cfg, "FLOW0_OUTBOUND_FRAME_SIZE_RNG": "2"}) is None


def test_frames_file_round_trip_and_goodput():
    frames, _ = parse_frames(VIDEO)
    text = frames_csv(frames)
    assert read_frames_csv(text) == frames
    series = goodput_series(frames, frames[0].send_us)
    inner = [v for _, v in series[1:-1]]
    assert all(v == pytest.approx(4.0, rel=0.05) for v in inner)  # 25 x 20,000 B x 8


def test_percentile_and_empty():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    s = frame_stats([FrameRecord(0, 0, None, 100)])
    assert s.frames_lost == 1 and s.delay_p99_ms is None


def test_a_paced_netperfmeter_result_carries_its_frames(tmp_path):
    """The backend's last step on the fixture's files: figures on the result, the per-frame
    file as an artifact, stored and read back like iperf3's JSON."""
    import shutil
    from datetime import UTC, datetime

    from probes.base import MeasurementRequest, MeasurementResult, TrafficProfile
    from probes.tools.netperfmeter import add_frames

    for f in VIDEO.iterdir():
        shutil.copy(f, tmp_path / f.name)
    def result(warmup_s):
        req = MeasurementRequest(sender="A", receiver="B", cc="reno", buffer_bytes=1 << 20,
                                 duration_s=10, warmup_s=warmup_s,
                                 profile=TrafficProfile.paced(25, 20000, 20.0))
        return MeasurementResult(request=req, tool="netperfmeter", tool_version="2.0.10",
                                 started_at=datetime(2026, 11, 21, tzinfo=UTC),
                                 ended_at=datetime(2026, 11, 21, tzinfo=UTC), mptcp_ok=True)

    res = result(0.0)
    add_frames(res, tmp_path)
    assert res.frames is not None and res.frames.frames_sent == 249
    assert res.frames.budget_ms == 20.0 and res.frames.late_frames == 2
    # the warm-up (2 s, the default for 10 s) leaves the connection's start out, as goodput does
    warm = result(2.0)
    add_frames(warm, tmp_path)
    assert warm.frames.frames_sent == 199 and warm.frames.late_frames == 0
    assert warm.frames.delay_max_ms < 20
    assert read_frames_csv(res.artifacts["frames.csv"].decode())[0].seq == 0
    back = MeasurementResult.from_dict(res.to_dict())
    assert back.frames == res.frames


def test_goodput_leaves_out_the_frames_after_the_sending_time():
    # 10 frames/s of 1,250 bytes (0.1 Mbit/s) for 2 s, each arriving 300 ms later
    recs = [FrameRecord(k, k * 100_000, k * 100_000 + 300_000, 1250) for k in range(20)]
    assert goodput_series(recs, 0, duration_s=2.0) == [(1.0, pytest.approx(0.07)),
                                                        (2.0, pytest.approx(0.1))]
    assert len(goodput_series(recs, 0)) == 3  # without: a thin third interval


def test_the_delay_cdf_counts_against_frames_sent_and_leaves_out_the_warm_up():
    # 10 frames at 10/s: the first (warm-up) slow, then 10..80 ms, the last one lost
    records = [FrameRecord(0, 0, 500_000, 100)] + [
        FrameRecord(i, i * 100_000, i * 100_000 + i * 10_000, 100) for i in range(1, 9)
    ] + [FrameRecord(9, 900_000, None, 100)]
    cdf = delay_cdf(records, warmup_s=0.1)
    assert [d for d, _ in cdf] == [10.0 * i for i in range(1, 9)]
    assert cdf[-1][1] == pytest.approx(8 / 9)  # one of the 9 frames sent after it was lost
    thin = delay_cdf(records, warmup_s=0.1, max_points=3)
    assert len(thin) <= 4 and thin[-1] == cdf[-1]


def test_the_hol_timeline_marks_lost_frames():
    records = [FrameRecord(i, i * 100_000, i * 100_000 + (30_000 if i == 5 else 10_000), 100)
               for i in range(8)] + [FrameRecord(8, 800_000, None, 100)]
    got, lost = hol_timeline(records, warmup_s=0.2)
    assert got[0] == (0.0, 0.0) and len(got) == 6
    assert (0.3, 20.0) in [(round(t, 3), round(h, 3)) for t, h in got]
    assert lost == [pytest.approx(0.6)]


def test_a_minimum_delay_below_the_paths_floor_is_no_measurement():
    """30 ms is the fastest path: a frame read at 24.06 ms (seen on a busy host) fails the
    probe with the reason; within the tolerance, or with relative clocks, it does not."""
    def stats(delays_ms, **kw):
        records = [FrameRecord(k, k * 20_000, k * 20_000 + round(d * 1000), 1200)
                   for k, d in enumerate(delays_ms)]
        return frame_stats(records, floor_ms=30.0, **kw)

    low = stats([31.2, 24.06, 30.8])
    assert low.delay_floor_ms == 30.0
    assert low.below_floor() == ("one-way delay below the path's floor: minimum 24.06 ms, "
                                 "no path is faster than 30 ms")
    assert stats([31.2, 29.2, 30.8]).below_floor() is None  # within FLOOR_TOLERANCE_MS
    assert stats([31.2, 24.06], clock="relative").below_floor() is None
    assert frame_stats([FrameRecord(0, 0, 24_060, 1200)]).below_floor() is None  # no floor


def test_an_offset_clock_below_the_floor_fails_within_its_uncertainty():
    """The same check on delays put on the sender's clock by an estimated offset: 24.06 ms on
    a 30 ms path still fails; the offset's uncertainty widens the tolerance by itself."""
    def stats(delays_ms, uncertainty_ms):
        offset = ClockOffset(offset_ms=5000.0, uncertainty_ms=uncertainty_ms, rtt_ms=60.0,
                             before_ms=5000.0, after_ms=5000.0, exchanges=10)
        records = [FrameRecord(k, k * 20_000, k * 20_000 + round(d * 1000), 1200)
                   for k, d in enumerate(delays_ms)]
        return frame_stats(records, floor_ms=30.0, offset=offset)

    low = stats([31.2, 24.06, 30.8], 0.5)
    assert low.clock == "offset" and low.clock_offset_ms == 5000.0
    assert low.clock_offset_uncertainty_ms == 0.5
    assert "minimum 24.06 ms, no path is faster than 30 ms" in (low.below_floor() or "")
    assert stats([31.2, 28.7, 30.8], 0.5).below_floor() is None  # 1 ms + 0.5 ms of slack
    assert stats([31.2, 28.7, 30.8], 0.1).below_floor() is not None


def test_one_way_delays_fall_back_to_relative_when_the_offset_is_too_uncertain():
    """δ = 0.07 of the least delay (30 ms): 2.1 ms of uncertainty still reads one-way, 2.2 ms
    falls back to delays relative to the flow's minimum, and says so (clock)."""
    records = [FrameRecord(k, k * 20_000, k * 20_000 + d, 1200)
               for k, d in enumerate([30_000, 34_000, 32_000])]

    def with_uncertainty(u: float, **kw):
        return frame_stats(records, offset=ClockOffset(
            offset_ms=0.0, uncertainty_ms=u, rtt_ms=60.0, before_ms=0.0, after_ms=0.0,
            exchanges=2), **kw)

    trusted = with_uncertainty(2.1)
    assert trusted.clock == "offset" and trusted.delay_min_ms == 30.0
    assert trusted.delay_max_ms == 34.0
    fallback = with_uncertainty(2.2)
    assert fallback.clock == "relative" and fallback.clock_offset_uncertainty_ms == 2.2
    assert fallback.delay_min_ms == 0.0 and fallback.delay_max_ms == 4.0
    assert fallback.below_floor() is None
    assert with_uncertainty(2.2, delta=0.1).clock == "offset"
