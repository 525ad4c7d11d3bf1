"""The emulated testbed and the iperf3 backend on real kernel MPTCP (needs root: marker netns)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from probes.base import (
    DEFAULT_EXCLUDED_MAX_BYTES,
    MeasurementRequest,
    MeasurementResult,
)
from probes.netns import ip, pid_alive, run_ns
from probes.testbed import lifecycle as tbmod
from tests.probes.conftest import assert_nothing_left, small_spec, unique_name
from tests.support import wait_for

pytestmark = pytest.mark.netns

CAPACITY_MBPS = 18.0  # min-cut of small_spec: uplinks 12 + 6, downlinks 12 + 6


def check_result(r: MeasurementResult, capacity: float) -> None:
    assert r.mptcp_ok, r.fallback_reason
    assert r.tool == "iperf3" and re.fullmatch(r"\d+\.\d+(\.\d+)?", r.tool_version)
    # Above the min-cut only by what a 2 s window after warm-up can gain on a busy host (the
    # shapers' buckets, the intervals' timing: 19.1 of 18 seen once); a shaper that let more
    # through would show far above it.
    # Below it by what CPU load beside the suite costs a 4 s probe (0.64 seen once in a full
    # run): a functional floor, not a figure; the benchmarks judge the figures.
    assert 0.50 * capacity <= r.goodput_mbps <= 1.12 * capacity, (r.goodput_mbps, capacity)
    assert len(r.goodput_series) >= 3
    assert r.started_at < r.ended_at
    assert r.mptcp_settings["sender"]["endpoints"]
    # buffers as the kernel had them on both ends (skmem of each end's MPTCP socket)
    assert all(r.effective_buffers[k] for k in ("sender_sndbuf", "sender_rcvbuf",
                                                "receiver_sndbuf", "receiver_rcvbuf")), \
        r.effective_buffers
    # both sites were idle before the probe, and that check is stored with it
    assert r.quiet_check is not None and r.quiet_check.quiet, r.quiet_check
    assert r.quiet_check.queued_bytes == 0 and r.quiet_check.backlog_bytes == 0
    # goodput_mbps leaves the warm-up out; the series keeps it
    assert r.warmup_s == r.request.warmup_s > 0
    assert r.goodput_series[0][0] <= r.warmup_s
    starts = [0.0] + [t for t, _ in r.goodput_series[:-1]]
    after = [v for t0, (_t, v) in zip(starts, r.goodput_series, strict=True)
             if t0 >= r.warmup_s - 0.05]
    assert len(after) < len(r.goodput_series)
    assert after and r.goodput_mbps == pytest.approx(sum(after) / len(after), rel=0.02)
    assert r.failure_reason() is None, r.failure_reason()
    # stored as JSON and read back unchanged
    assert MeasurementResult.from_dict(r.to_dict()).goodput_mbps == r.goodput_mbps


def test_up_is_idempotent_and_status(testbed2x2):
    pid = tbmod.testbed_status(testbed2x2.name)["delayline_pid"]
    again = tbmod.up(testbed2x2.spec)
    st = again.status()
    assert st["healthy"] and st["delayline_pid"] == pid
    assert len(st["namespaces"]) == 3
    assert any(s["name"] == testbed2x2.name for s in tbmod.status())
    assert tbmod.attach(testbed2x2.name).spec == testbed2x2.spec


def test_routing_shaping_and_delay(testbed2x2):
    ns = testbed2x2.ns("A")
    # per-source routing: each local address leaves through its own ISP link
    for lk in testbed2x2.site_links("A"):
        out = run_ns(ns, ["ip", "route", "get", "10.2.1.1", "from", lk.address]).stdout
        assert f"dev {lk.site_dev}" in out
    qd = run_ns(ns, ["tc", "qdisc", "show", "dev", "isp-T"]).stdout
    assert "tbf" in qd and "6Mbit" in qd
    # the queue the kernel has is the stated one: status says 16 packets on T (set in the
    # spec), the default (20 ms, the 2 x 10 ms path's BDP clamped up) on U
    queues = {(q["isp"], q["direction"]): q for q in testbed2x2.status()["queues"]
              if q["site"] == "A"}
    assert queues[("T", "up")]["packets"] == 16 and queues[("T", "up")]["source"] == "isp"
    assert queues[("U", "up")]["ms"] == 20.0 and queues[("U", "up")]["source"] == "default"
    for dev, q in (("isp-T", queues[("T", "up")]), ("isp-U", queues[("U", "up")])):
        (tbf,) = json.loads(run_ns(ns, ["tc", "-j", "qdisc", "show", "dev", dev]).stdout)
        opt = tbf["options"]  # tc reports the limit as latency: (limit - burst) / rate
        lat_ms = (q["bytes"] - opt["burst"]) * 8 / (q["rate_kbps"] * 1000) * 1000
        assert abs(opt["lat"] / 1000 - lat_ms) < 0.5, (opt, q)
    # RTT through the delay line: 2 x 10 ms configured
    t0 = time.monotonic()
    out = run_ns(ns, ["ping", "-c", "5", "-i", "0.2", "-I", "10.1.1.1", "10.2.0.1"]).stdout
    assert time.monotonic() - t0 < 10
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts) == 5
    assert 20.0 <= min(rtts) <= 22.0, rtts


def test_available_congestion_controls(testbed2x2):
    ccs = tbmod.available_congestion_controls(testbed2x2.ns("A"))
    assert {"reno", "cubic"} <= set(ccs)


@pytest.mark.parametrize("cc", ["cubic", "reno"])
def test_iperf3_fullmesh_live(testbed2x2, cc):
    r = testbed2x2.measure(MeasurementRequest(sender="A", receiver="B", cc=cc, duration_s=4))
    check_result(r, CAPACITY_MBPS)
    assert r.subflow_count == 4  # FullMesh: Ns x Mr
    assert set(r.subflow_bytes) == {"U-D", "U-O", "T-D", "T-O"}
    assert r.kernel["sender_cc_used"] == cc
    assert r.backup_subflows == []
    assert r.subflow_problems == []
    assert set(r.raw["subflow_rtt_ms"]) == set(r.subflow_bytes)  # the service reads it
    for o in r.observed_subflows:  # per subflow: RTT under load, unloaded RTT (minrtt), RTO
        assert not o.backup and o.bytes_acked > 1000
        assert 20.0 <= o.min_rtt_ms <= o.rtt_ms + 0.5, o
        assert o.rto_ms >= 200.0, o  # Linux's floor: 200 ms + RTT variance


def test_iperf3_excluded_subflows_carry_no_payload(testbed2x2, monkeypatch):
    from probes.tools import subflowctl

    made = []  # the helper's folders, made for real: each probe removes its own

    def mkdtemp(**kwargs):
        made.append(Path(real_mkdtemp(**kwargs)))
        return str(made[-1])

    real_mkdtemp = subflowctl.tempfile.mkdtemp
    monkeypatch.setattr(subflowctl.tempfile, "mkdtemp", mkdtemp)
    allowed = ["U-D", "T-O"]
    r = testbed2x2.measure(MeasurementRequest(
        sender="A", receiver="B", cc="cubic", duration_s=4, allowed_subflows=allowed,
        path_manager="PCDC"))
    check_result(r, testbed2x2.spec.capacity_kbps("A", "B", allowed) / 1000)
    assert r.subflow_count == 4  # excluded subflows are still established
    assert sorted(r.backup_subflows) == ["T-D", "U-O"]
    total = sum(r.subflow_bytes.values())
    for excluded in ("T-D", "U-O"):
        assert excluded in r.subflow_bytes
        assert r.subflow_bytes[excluded] <= DEFAULT_EXCLUDED_MAX_BYTES, r.subflow_bytes
    for used in allowed:
        assert r.subflow_bytes[used] > 0.2 * total
    seen = {o.name: o for o in r.observed_subflows}
    assert seen["T-D"].backup and seen["U-O"].backup
    assert seen["T-D"].bytes_acked <= DEFAULT_EXCLUDED_MAX_BYTES
    assert r.subflow_problems == []
    # the sender is back on the in-kernel path manager afterwards, and left no folder behind
    assert tbmod.sysctl_get(testbed2x2.ns("A"), "net.mptcp.path_manager") == "kernel"
    assert made and not any(d.exists() for d in made)


def test_an_excluded_subflow_left_active_fails_the_probe(testbed2x2):
    """A real fault: the path manager creates the excluded T-D without the backup flag. The
    relative 1 % check could pass such a thin subflow; the observed-set check must not."""
    r = testbed2x2.measure(
        MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=3,
                           allowed_subflows=["U-D", "T-O"], path_manager="PCDC"),
        leave_active=("T-D",))
    seen = {o.name: o for o in r.observed_subflows}
    assert not seen["T-D"].backup and seen["U-O"].backup
    assert seen["T-D"].bytes_acked > DEFAULT_EXCLUDED_MAX_BYTES
    assert "subflow T-D: excluded but not in backup" in r.subflow_problems
    assert any(p.startswith("subflow T-D: excluded but carried") for p in r.subflow_problems)
    assert not any("U-O" in p for p in r.subflow_problems)
    assert "T-D" in (r.failure_reason() or "")


def stalled_probe(bed: tbmod.Testbed, stall_s: float, attempts: int = 1) -> MeasurementResult:
    """A PCDC probe on U-D alone (U-O, T-D, T-O excluded, in backup) whose path stalls for
    `stall_s` seconds mid-probe: B's replies from its D address are blackholed (a routing rule
    in B's namespace), so the sender's U-D gets no ACK and its retransmission timer fires, as on
    a path that drops everything for a moment. Up to `attempts` probes, until an excluded
    subflow carried more than the absolute limit (the kernel does not always reinject)."""
    ns, addr = bed.ns("B"), bed.address("B", "D")
    ip(ns, "route", "replace", "blackhole", "default", "table", "199")

    def stall() -> None:
        time.sleep(4.0)  # the probe's quiet check and start-up take 1-2 s of it
        ip(ns, "rule", "add", "from", addr, "table", "199", "pref", "5")
        time.sleep(stall_s)
        ip(ns, "rule", "del", "pref", "5")

    request = MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=8,
                                 allowed_subflows=["U-D"], path_manager="PCDC")
    try:
        for _ in range(attempts):
            t = threading.Thread(target=stall)
            t.start()
            try:
                r = bed.measure(request)
            finally:
                t.join()
            if sum(b for n, b in r.subflow_bytes.items() if n != "U-D") > \
                    DEFAULT_EXCLUDED_MAX_BYTES:
                break
        return r
    finally:
        ip(ns, "rule", "del", "pref", "5", check=False)
        ip(ns, "route", "flush", "table", "199", check=False)


def test_data_reinjected_onto_backup_subflows_after_a_stall_passes(testbed2x2):
    """Honest: a 0.3 s stall, one retransmission timeout on U-D; the kernel sends the data in
    flight again on a backup subflow (shared.yaml: 23-27 KB). More than the absolute limit,
    but data moved off a stalled subflow: the probe stands."""
    r = stalled_probe(testbed2x2, 0.3, attempts=3)
    seen = {o.name: o for o in r.observed_subflows}
    assert seen["U-D"].bytes_retrans > 0
    excluded = {n: o.bytes_acked for n, o in seen.items() if n != "U-D"}
    assert all(seen[n].backup for n in excluded)
    assert sum(excluded.values()) > DEFAULT_EXCLUDED_MAX_BYTES, excluded
    assert max(excluded.values()) <= 0.05 * sum(o.bytes_acked for o in seen.values())
    assert r.subflow_problems == [], r.subflow_problems


def test_a_backup_subflow_that_took_over_fails_the_probe(testbed2x2):
    """A real leak: a 2 s stall, and the kernel sends new data on a backup subflow for as long
    (shared.yaml: 19-31 % of the probe's bytes): the probe measured another path."""
    r = stalled_probe(testbed2x2, 2.0)
    assert any(re.match(r"subflow (U-O|T-O|T-D): excluded but carried \d+ bytes", p)
               for p in r.subflow_problems), (r.subflow_problems, r.subflow_bytes)
    assert "excluded but carried" in (r.failure_reason() or "")


def test_bad_request_names_the_field(testbed2x2):
    with pytest.raises(tbmod.TestbedError, match="allowed_subflows"):
        testbed2x2.measure(MeasurementRequest(sender="A", receiver="B",
                                              allowed_subflows=["U-X"]))
    with pytest.raises(tbmod.TestbedError, match="site 'Z'"):
        testbed2x2.measure(MeasurementRequest(sender="Z", receiver="B"))


def test_two_testbeds_do_not_collide_and_down_cleans_after_a_crash(testbed2x2):
    spec = small_spec(unique_name("c"))
    bed = tbmod.up(spec)
    try:
        assert bed.status()["healthy"] and testbed2x2.status()["healthy"]
        pid = bed.status()["delayline_pid"]
        os.kill(pid, signal.SIGKILL)  # a crashed delay line
        wait_for(lambda: not pid_alive(pid), 5, "the killed delay line to be gone",
                 interval=0.05)
        assert not bed.status()["healthy"]
        with pytest.raises(tbmod.TestbedError):
            tbmod.attach(spec.name)
        # a leftover process inside a namespace is ended by down as well
        subprocess.Popen(["ip", "netns", "exec", bed.ns("A"), "sleep", "60"])
    finally:
        tbmod.down(spec.name)
    assert_nothing_left(spec.name, pid)
    assert testbed2x2.status()["healthy"]  # the other testbed is untouched


def test_delay_line_exits_when_its_namespace_goes(testbed2x2):
    spec = small_spec(unique_name("g"))
    bed = tbmod.up(spec)
    pid = bed.status()["delayline_pid"]
    try:
        subprocess.run(["ip", "netns", "del", bed.core_ns], check=True)
        wait_for(lambda: not pid_alive(pid), 5, "the delay line to exit with its namespace",
                 interval=0.05)
    finally:
        tbmod.down(spec.name)
    assert_nothing_left(spec.name, pid)
