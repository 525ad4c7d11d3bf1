"""The paced tool and its backend's pieces, without namespaces: command lines, the frame
records, and the tool itself over loopback MPTCP on this host's stack."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from probes.base import MeasurementRequest, ProbeError, TrafficProfile
from probes.frames import frame_stats
from probes.tools.paced import TOOL, build_commands, frame_records
from tests.support import free_port_pair


def req(**kw) -> MeasurementRequest:
    return MeasurementRequest(sender="A", receiver="B", duration_s=4, cc="reno",
                              profile=TrafficProfile.paced(25, 20000), **kw)


def test_commands():
    server, client = build_commands(req(buffer_bytes=1 << 20), port=23000,
                                    server_addr="10.9.0.1", bind_addr="10.1.0.1",
                                    python="/usr/bin/python3")
    assert server == ["/usr/bin/python3", TOOL, "recv", "--port", "23000", "--buffer",
                      "1048576", "--deadline", "9", "--clock", "monotonic"]
    assert client[2:] == ["send", "--connect", "10.9.0.1", "--port", "23000", "--rate", "25",
                          "--size", "20000", "--duration", "4", "--cc", "reno", "--buffer",
                          "1048576", "--clock", "monotonic", "--sync", "5", "--deadline", "9",
                          "--bind", "10.1.0.1"]
    _, auto = build_commands(req(), port=23000, server_addr="10.9.0.1", bind_addr=None)
    assert auto[auto.index("--buffer") + 1] == "0" and "--bind" not in auto
    with pytest.raises(ProbeError, match="only paced"):
        build_commands(MeasurementRequest(sender="A", receiver="B"), port=1, server_addr="x",
                       bind_addr=None)


def test_frames_not_received_are_lost_at_their_slot():
    sender = {"frames_sent": 4, "first_send_us": 1_000_000, "rate_hz": 25.0, "size": 500}
    receiver = {"frames": [[0, 1_000_000, 1_030_000, 500], [2, 1_080_000, 1_111_000, 500]]}
    recs = frame_records(receiver, sender)
    assert [r.recv_us is None for r in recs] == [False, True, False, True]
    assert recs[3].send_us == 1_120_000
    s = frame_stats(recs)
    assert s.frames_lost == 2 and s.delay_max_ms == pytest.approx(31.0)


@pytest.mark.slow  # processes of its own
def test_the_tool_over_loopback_mptcp():
    """Real sockets on this host: 40 frames at 50/s arrive in order with sub-ms delay, the
    buffers asked are set and read back doubled."""
    port = free_port_pair()
    recv = subprocess.Popen([sys.executable, TOOL, "recv", "--port", str(port), "--buffer",
                             "65536", "--deadline", "30", "--clock", "monotonic"],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "listening" in recv.stderr.readline()
        sent = subprocess.run([sys.executable, TOOL, "send", "--connect", "127.0.0.1", "--port",
                               str(port), "--rate", "50", "--size", "3000", "--duration",
                               "0.8", "--cc", "cubic", "--buffer", "65536", "--clock",
                               "monotonic"],
                              capture_output=True, text=True, timeout=20, check=True)
        out, _ = recv.communicate(timeout=20)
    finally:
        recv.kill()
    s, r = json.loads(sent.stdout), json.loads(out)
    assert s["frames_sent"] == 40 and s["cc"] == "cubic" and s["nodelay"]
    assert s["buffers"] == {"set": 65536, "sndbuf": 131072, "rcvbuf": 131072}
    assert r["eof"] and [f[0] for f in r["frames"]] == list(range(40))
    stats = frame_stats(frame_records(r, s))
    # both ends stamped the host's monotonic clock: no delay below 0, none absurdly long (a
    # second: a busy host schedules either end tens of milliseconds late, loopback adds none)
    assert stats.frames_lost == 0 and stats.delay_min_ms >= 0 and stats.delay_p99_ms < 1000


@pytest.mark.slow  # processes of its own
def test_a_stalled_connection_ends_the_stream_within_its_duration_plus_the_margin():
    """A receiver that stops reading after 1 s (its read deadline, sent in the hello) makes the
    connection take no more data, for real: the sender's write blocks. It ends the stream at
    the duration plus STALL_MARGIN_S, says why, and every frame not delivered counts as lost
    (what a stream that stalls is: not carried)."""
    from probes.tools.paced_tool import STALL_MARGIN_S

    port = free_port_pair()
    recv = subprocess.Popen([sys.executable, TOOL, "recv", "--port", str(port), "--buffer",
                             "65536", "--clock", "monotonic"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    duration = 3.0
    try:
        assert "listening" in recv.stderr.readline()
        started = time.monotonic()
        sent = subprocess.run([sys.executable, TOOL, "send", "--connect", "127.0.0.1", "--port",
                               str(port), "--rate", "50", "--size", "200000", "--duration",
                               f"{duration:g}", "--cc", "cubic", "--buffer", "65536",
                               "--clock", "monotonic", "--deadline", "1"],
                              capture_output=True, text=True, timeout=40, check=True)
        took = time.monotonic() - started
        out, _ = recv.communicate(timeout=20)
    finally:
        recv.kill()
    s, r = json.loads(sent.stdout), json.loads(out)
    assert "stalled" in s["stalled"] and f"plus {STALL_MARGIN_S:g} s" in s["stalled"], s
    # the writes ended at the duration plus the margin (a busy machine: 3 s of slack after)
    wrote_s = (s["last_write_done_us"] - s["first_send_us"]) / 1e6
    assert duration + STALL_MARGIN_S - 0.1 <= wrote_s < duration + STALL_MARGIN_S + 1.0
    assert took < duration + STALL_MARGIN_S + 3.0, took
    stats = frame_stats(frame_records(r, s))
    assert stats.frames_sent == 150 and stats.frames_lost > 75  # read for 1 s of 3
    assert stats.lost_fraction == pytest.approx(1 - len(r["frames"]) / 150)
