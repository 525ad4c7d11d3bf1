"""IPv6-only and dual-stack testbeds on real kernel MPTCP (needs root: marker netns): the
shipped scenarios v6-pair and dual-pair, their routing, the probes (iperf3, the paced tool, the
userspace path manager), the confirmation tool and a site worker's `--isp` with IPv6."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.base import DEFAULT_EXCLUDED_MAX_BYTES, MeasurementRequest, TrafficProfile
from probes.netns import run_ns
from probes.site import mptcpapp
from probes.site.local import capability_report, resolve_local_site
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import load_spec, scenario_path
from probes.tools import twosided as ts
from probes.tools.ports import choose_port_triple
from tests.probes.conftest import assert_nothing_left, unique_name

pytestmark = pytest.mark.netns

MPCOA = str(Path(sys.executable).parent / "mpcoa")
REPO = Path(__file__).resolve().parents[2]
CAPACITY_MBPS = 15.0  # both scenarios: A's uplinks 10 + 5 (B's downlinks carry 30)
CARRIED = 100_000  # bytes: a subflow that carried data in a 4 s probe carries far more


def _bed(scenario: str, tag: str) -> Iterator[tbmod.Testbed]:
    spec = load_spec(scenario_path(scenario)).model_copy(update={"name": unique_name(tag)})
    try:
        yield tbmod.up(spec)
    finally:
        st = tbmod.testbed_status(spec.name)
        tbmod.down(spec.name)
        assert_nothing_left(spec.name, st.get("delayline_pid"))


@pytest.fixture(scope="module")
def v6bed() -> Iterator[tbmod.Testbed]:
    yield from _bed("v6-pair", "six")


@pytest.fixture(scope="module")
def dualbed() -> Iterator[tbmod.Testbed]:
    yield from _bed("dual-pair", "dual")


def _rtts(ns: str, src: str, dst: str) -> list[float]:
    out = run_ns(ns, ["ping", "-c", "5", "-i", "0.2", "-I", src, dst]).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def _carried(r) -> list[str]:
    """The subflows that carried data, by their ISP names (ss's IPv6 addresses mapped back)."""
    return sorted(n for n, b in r.subflow_bytes.items() if b > CARRIED)


def _is_v6(address: str) -> bool:
    return ipaddress.ip_address(address).version == 6


def test_an_ipv6_testbed_has_ipv6_links_only(v6bed):
    st = v6bed.status()
    assert st["healthy"] and st["addresses"] == "ipv6"
    ns = v6bed.ns("A")
    for lk in v6bed.site_links("A"):
        (link,) = json.loads(run_ns(ns, ["ip", "-j", "addr", "show", "dev", lk.site_dev]).stdout)
        families = {a["family"] for a in link["addr_info"] if a.get("scope") == "global"}
        assert families == {"inet6"}, link
        # per-source routing, IPv6's own rules: each address leaves through its own link
        out = run_ns(ns, ["ip", "-6", "route", "get", "fd00:2:1::1", "from", lk.address]).stdout
        assert f"dev {lk.site_dev}" in out, out
    # the delay line holds IPv6 packets for the path's delay: F-M 8 ms each way
    rtts = _rtts(ns, v6bed.address("A", "F"), v6bed.address("B", "M"))
    assert len(rtts) == 5 and 16.0 <= min(rtts) <= 19.0, rtts


def test_an_mptcp_probe_over_ipv6_carries_data_on_every_subflow(v6bed):
    r = v6bed.measure(MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=4))
    assert r.mptcp_ok, r.fallback_reason
    assert r.failure_reason() is None, r.failure_reason()
    assert _is_v6(r.raw["plan"]["server"]) and _is_v6(r.raw["plan"]["bind"])
    assert r.subflow_count == 4 and r.subflow_problems == []
    carried = _carried(r)
    assert len(carried) >= 2, r.subflow_bytes  # the bar; all four carry here
    assert set(r.subflow_bytes) == {"F-M", "F-R", "C-M", "C-R"}
    assert 0.6 * CAPACITY_MBPS <= r.goodput_mbps <= 1.05 * CAPACITY_MBPS, r.goodput_mbps
    print(f"IPv6 FullMesh: {r.goodput_mbps:.2f} Mbit/s of {CAPACITY_MBPS:g}; bytes per subflow "
          f"{dict(sorted(r.subflow_bytes.items()))}")


def test_the_userspace_path_manager_excludes_ipv6_subflows(v6bed):
    allowed = ["F-M", "C-R"]
    r = v6bed.measure(MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=4,
                                         allowed_subflows=allowed, path_manager="PCDC"))
    assert r.failure_reason() is None, r.failure_reason()
    assert r.subflow_count == 4 and sorted(r.backup_subflows) == ["C-M", "F-R"]
    assert _carried(r) == sorted(allowed), r.subflow_bytes
    for excluded in ("C-M", "F-R"):
        assert r.subflow_bytes[excluded] <= DEFAULT_EXCLUDED_MAX_BYTES, r.subflow_bytes
    creates = [e for e in r.raw["upm_events"] if e.get("action") == "subflow_create"]
    assert creates and not any("error" in e for e in creates), creates


def test_a_paced_stream_over_ipv6(v6bed):
    r = v6bed.measure(MeasurementRequest(
        sender="A", receiver="B", cc="cubic", duration_s=4, warmup_s=1,
        allowed_subflows=["F-M"], path_manager="PCDC",
        profile=TrafficProfile.paced(50.0, 1200, 40.0)), backend="paced")
    assert r.failure_reason() is None, r.failure_reason()
    f = r.frames
    assert f is not None and f.frames_sent == 150 and f.frames_lost == 0, f  # after the warm-up
    assert 8.0 <= f.delay_min_ms < 12.0, f  # F-M: 8 ms one way, over IPv6
    assert _is_v6(r.raw["plan"]["server"])


def test_the_confirmation_tool_over_ipv6(v6bed):
    """The plain MPTCP application an apply confirms with, on the in-kernel path manager and
    the testbed's IPv6 endpoints: its connection grows subflows of its own."""
    v6bed.set_direction("A", "B")
    port = choose_port_triple([v6bed.ns("A"), v6bed.ns("B")])
    out = mptcpapp.confirm(sender_ns=v6bed.ns("A"), receiver_ns=v6bed.ns("B"),
                           source=v6bed.address("A", "F"), destination=v6bed.address("B", "M"),
                           port=port, seconds=3, warmup_s=1)
    assert not out["fallback"] and out["peak_subflows"] >= 1, out  # 2 or more subflows
    assert out["goodput_mbps"] > 0.3 * CAPACITY_MBPS, out


def test_a_site_worker_with_ipv6_isps_probes_two_sided(v6bed, tmp_path):
    """`mpcoa worker --isp` with IPv6 addresses (one by address, one by interface), each site's
    half in its own namespace as on two hosts: the first probe carries data on 2+ subflows."""
    a = resolve_local_site("A", ["F=fd00:1::1", "C=@isp-C"], ns=v6bed.ns("A"))
    b = resolve_local_site("B", ["M=FD00:2::1", "R=@isp-R"], ns=v6bed.ns("B"))
    assert a.isps == {"F": "fd00:1::1", "C": "fd00:1:1::1"}
    assert b.isps == {"M": "fd00:2::1", "R": "fd00:2:1::1"}
    report = capability_report(a, ns=v6bed.ns("A"))
    assert report["address_family"] == "ipv6" and report["endpoints"] == a.isps
    with pytest.raises(ValueError, match="not configured on this host"):
        resolve_local_site("A", ["F=10.1.0.1"], ns=v6bed.ns("A"))  # no IPv4 here
    # the command itself, in the site's namespace as on its host: checked, ready (status 0)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "MPCOA_DATA_DIR": str(tmp_path), "HOME": str(tmp_path),
           "MPCOA_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    cp = subprocess.run(
        ["ip", "netns", "exec", v6bed.ns("A"), MPCOA, "worker", "--site", "A",
         "--isp", "F=2001:db8::2", "--check"], env=env, capture_output=True, text=True,
        timeout=60, check=False)
    assert cp.returncode == 1 and "not configured on this host" in cp.stderr, cp.stderr
    assert "Traceback" not in cp.stderr
    cp = subprocess.run(
        ["ip", "netns", "exec", v6bed.ns("A"), MPCOA, "worker", "--site", "A",
         "--isp", "F@fd00:1::1", "--isp", "C@isp-C", "--check", "--json"], env=env,
        capture_output=True, text=True, timeout=60, check=False)
    assert cp.returncode == 0, cp.stderr
    checked = json.loads(cp.stdout)
    assert checked["endpoints"] == a.isps and checked["address_family"] == "ipv6", checked
    request = MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=4)
    with v6bed.lock():
        run = ts.passive_start(request, local_addrs=b.isps, ns=v6bed.ns("B"))
        try:
            r = ts.active_measure(
                request, sender_addrs=a.isps, receiver_addrs=b.isps, port=run.port,
                wait_report=lambda: ts.passive_finish(run, wait_s=30), ns=v6bed.ns("A"))
        finally:
            run.server.kill()
    assert r.failure_reason() is None, r.failure_reason()
    assert len(_carried(r)) >= 2, r.subflow_bytes


def test_a_dual_stack_testbed_carries_both_families(dualbed):
    st = dualbed.status()
    assert st["healthy"] and st["addresses"] == "dual"
    ns = dualbed.ns("A")
    for v in (4, 6):  # each family delayed alike: C-M 10 ms each way
        rtts = _rtts(ns, dualbed.address("A", "C", v), dualbed.address("B", "M", v))
        assert len(rtts) == 5 and 20.0 <= min(rtts) <= 23.0, (v, rtts)
    endpoints = run_ns(ns, ["ip", "mptcp", "endpoint", "show"]).stdout
    assert "10.1.0.1" in endpoints and "fd00:1::1" in endpoints, endpoints
    # the probes run over IPv6
    r = dualbed.measure(MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=4))
    assert r.failure_reason() is None, r.failure_reason()
    assert _is_v6(r.raw["plan"]["server"]) and len(_carried(r)) >= 2, r.subflow_bytes
    # an IPv4 application on the same links gets its subflows from the IPv4 endpoints
    dualbed.set_direction("A", "B")
    port = choose_port_triple([ns, dualbed.ns("B")])
    out = mptcpapp.confirm(sender_ns=ns, receiver_ns=dualbed.ns("B"),
                           source=dualbed.address("A", "F", 4),
                           destination=dualbed.address("B", "M", 4),
                           port=port, seconds=3, warmup_s=1)
    assert not out["fallback"] and out["peak_subflows"] >= 1, out


@pytest.mark.netperfmeter
def test_netperfmeter_over_ipv6(v6bed):
    """NetPerfMeter 2.x's active side given the receiver's IPv6 address as [ADDR]:PORT."""
    r = v6bed.measure(MeasurementRequest(sender="A", receiver="B", cc="cubic", duration_s=4),
                      backend="netperfmeter")
    assert r.failure_reason() is None, r.failure_reason()
    assert _is_v6(r.raw["plan"]["server"]) and len(_carried(r)) >= 2, r.subflow_bytes
