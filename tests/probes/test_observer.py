"""The shared observer: parsing real `ss -tinm` / `ss -Minm` of a 2 x 2 run (1 MiB buffers),
matching the receiver's MPTCP socket to the sender's, and a poller that never spins."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.tools.context import HostPair
from probes.tools.observer import SsPoller, _keep_max_buffers, observe
from probes.tools.sstats import parse_skmem, parse_ss_msk, parse_ss_subflows

DATA = Path(__file__).parent / "data"
PAIR = HostPair(None, None, {"U": "10.1.0.1", "T": "10.1.1.1"}, {"D": "10.2.0.1", "O": "10.2.1.1"})
PORT = 25001


def test_skmem_rto_minrtt_from_real_output():
    sfs = [s for s in parse_ss_subflows((DATA / "ss_tinm_sender.txt").read_text())
           if s["rport"] == PORT]
    data = [s for s in sfs if s["bytes_acked"] > 100_000]
    assert len(data) == 4
    for s in data:
        # iperf3 -w 1M: Linux doubles SO_SNDBUF/SO_RCVBUF; the subflows inherit both
        assert s["sndbuf"] == s["rcvbuf"] == 2 * 1024 * 1024
        assert s["rto_ms"] >= 200 and 20.0 <= s["min_rtt_ms"] <= s["rtt_ms"] + 1
        assert s["cc"] == "reno"
    assert parse_skmem("skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0)") == {
        "r": 0, "rb": 131072, "t": 0, "tb": 87040, "f": 0, "w": 0, "o": 0, "bl": 0, "d": 0}


def test_receiver_side_v4_mapped_addresses_and_queues():
    msks = parse_ss_msk((DATA / "ss_minm_receiver.txt").read_text())
    assert {m["local"] for m in msks} == {"10.2.0.1"}  # "::ffff:" stripped
    data = max(msks, key=lambda m: m["recv_q"])
    assert data["recv_q"] > 0 and data["state"] == "ESTAB"
    assert data["rcvbuf"] == data["sndbuf"] == 2 * 1024 * 1024


def test_observe_builds_named_subflows_and_both_ends_buffers():
    p = SsPoller(None, PORT, watch_receiver=True)
    for sf in parse_ss_subflows((DATA / "ss_tinm_sender.txt").read_text()):
        if sf["rport"] == PORT and sf["token"]:
            p.subflows[(sf["token"], sf["local"], sf["lport"], sf["remote"], sf["rport"])] = sf
    for ms in parse_ss_msk((DATA / "ss_minm_sender.txt").read_text()):
        if ms["rport"] == PORT and ms["token"]:
            p.msk[ms["token"]] = ms
    for ms in parse_ss_msk((DATA / "ss_minm_receiver.txt").read_text()):
        p.receiver_msk[(ms["remote"], ms["rport"])] = ms
    obs = observe(p, PAIR)
    assert [s.name for s in obs.subflows] == ["T-D", "T-O", "U-D", "U-O"]
    assert all(s.bytes_acked > 100_000 and not s.backup for s in obs.subflows)
    assert obs.fallback_reason is None
    mib2 = 2 * 1024 * 1024
    assert obs.buffers == {"sender_sndbuf": mib2, "sender_rcvbuf": mib2,
                           "receiver_sndbuf": mib2, "receiver_rcvbuf": mib2}


def test_a_buffer_asked_is_read_as_the_run_had_it_and_autotuned_ones_at_their_largest():
    """NetPerfMeter's passive side sets the asked buffer on its accepted socket only when the
    flow identifies itself: a receiver sample before that reads the kernel's defaults (seen on
    SRL-HU: rb 131072 with 16 KiB asked). A size asked is locked once set, so the check reads
    the latest sample; an autotuned buffer grows, so the largest."""
    p = SsPoller(None, PORT, watch_receiver=True)
    for sf in parse_ss_subflows((DATA / "ss_tinm_sender.txt").read_text()):
        if sf["rport"] == PORT and sf["token"]:
            p.subflows[(sf["token"], sf["local"], sf["lport"], sf["remote"], sf["rport"])] = sf
    for ms in parse_ss_msk((DATA / "ss_minm_sender.txt").read_text()):
        if ms["rport"] == PORT and ms["token"]:
            _keep_max_buffers(ms, {})
            p.msk[ms["token"]] = ms
    for ms in parse_ss_msk((DATA / "ss_minm_receiver.txt").read_text()):
        accepted = {**ms, "rcvbuf": 131072 * 32, "sndbuf": 87040 * 32}  # before it was set
        _keep_max_buffers(accepted, {})
        _keep_max_buffers(ms, accepted)
        p.receiver_msk[(ms["remote"], ms["rport"])] = ms
    obs = observe(p, PAIR)
    mib2 = 2 * 1024 * 1024
    assert obs.buffers["receiver_rcvbuf"] == 131072 * 32  # the largest seen
    assert obs.buffers_for(1 << 20) == {"sender_sndbuf": mib2, "sender_rcvbuf": mib2,
                                        "receiver_sndbuf": mib2, "receiver_rcvbuf": mib2}
    assert obs.buffers_for(None) == obs.buffers


def test_no_subflow_seen_is_plain_tcp():
    obs = observe(SsPoller(None, PORT), PAIR)
    assert obs.subflows == [] and "plain TCP" in (obs.fallback_reason or "")


def test_a_connection_made_plain_tcp_at_connect_is_a_fallback():
    """Seen on the testbed under the kernel's blackhole lockout (MP_CAPABLE SYNs dropped by
    nftables): the data connection's subflow has token 0000 and no MPTCP socket in `ss -M`."""
    p = SsPoller(None, 20565)
    for sf in parse_ss_subflows((DATA / "ss_tin_lockout_sender.txt").read_text()):
        p.subflows[(sf["token"], sf["local"], sf["lport"], sf["remote"], sf["rport"])] = sf
    obs = observe(p, PAIR)
    assert [s.name for s in obs.subflows] == ["U-D"]
    assert "plain TCP at connect" in (obs.fallback_reason or "")


class _Enough(Exception):
    pass


def test_poller_waits_between_failed_samples():
    """A real failure (the ss binary is missing): the poller must wait its interval after each
    error instead of retrying at once. Its pause is injected: each wait is counted, and the
    sixth ends the loop, with no wall-clock time to guess."""
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 6:
            raise _Enough

    p = SsPoller(None, PORT, interval=0.1, ss="/nonexistent/mpcoa-no-ss", wait=wait)
    with pytest.raises(_Enough):
        p.run()
    assert p.errors == len(waits) == 6 and waits == [0.1] * 6  # one wait after each error
    assert "not installed" in p.last_error and p.samples == 0
    # the thread itself stops when told, its pause cut short
    p = SsPoller(None, PORT, interval=60, ss="/nonexistent/mpcoa-no-ss")
    p.start()
    p.stop()
    assert not p.is_alive() and p.errors <= 1


def test_only_sockets_that_can_still_send_keep_a_site_busy():
    from probes.tools.hygiene import still_sending

    mptcp = ("FIN-WAIT-2 239872 0 10.2.0.1:27767 10.1.0.1:39337\n"  # an aborted probe's leftover
             "ESTAB 0 4096 10.1.0.1:40000 10.2.0.1:5201\n")
    tcp = "ESTAB 1500 0 10.2.0.1:5201 10.1.0.1:40001\nLISTEN 0 128 0.0.0.0:5201 0.0.0.0:*\n"
    busy = still_sending("B", tcp, mptcp)
    assert [q for _, q in busy] == [1500, 4096]
    assert all("FIN-WAIT-2" not in d for d, _ in busy)
