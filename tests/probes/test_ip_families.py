"""IPv4 and IPv6 without a network: the scenario's `addresses`, the testbed's address plan, the
userspace path manager's netlink attributes, `--isp` values, and the probes' family checks."""

from __future__ import annotations

import re
import socket
import struct

import pytest

from probes.base import CapabilityError, MeasurementRequest
from probes.site.local import parse_isp_option
from probes.testbed.delayline import _packed
from probes.testbed.lifecycle import Testbed
from probes.testbed.spec import SpecError, load_spec, parse_spec, scenario_path
from probes.tools import upm
from probes.tools.context import HostPair
from probes.tools.netperfmeter import _host_port
from probes.tools.subflowctl import plan_subflows
from tests.probes.conftest import small_spec


def test_addresses_defaults_to_ipv4_and_keeps_old_digests():
    spec = small_spec("fam")
    assert spec.addresses == "ipv4"
    assert small_spec("fam", addresses="ipv4").digest() == spec.digest()
    assert small_spec("fam", addresses="dual").digest() != spec.digest()
    assert load_spec(scenario_path("v6-pair")).addresses == "ipv6"
    assert load_spec(scenario_path("dual-pair")).addresses == "dual"


@pytest.mark.parametrize("bad", ["IPv6", "v6", "both", "", 6, None])
def test_a_bad_addresses_value_names_the_field(bad):
    with pytest.raises(SpecError, match=r"^addresses: .*(ipv4 \| ipv6 \| dual|string)"):
        small_spec("fam", addresses=bad)


def test_ipv6_refuses_ipv4_only_parts():
    cross = {"name": "A", "isps": [{"name": "U", "label": "U", "down_kbps": 9000,
                                    "up_kbps": 9000,
                                    "cross": {"kind": "bulk", "direction": "up", "flows": 1}}]}
    data = small_spec("fam").model_dump(mode="json", exclude_none=True)
    data["sites"][0] = cross
    with pytest.raises(SpecError, match=r"addresses: ipv6 with cross traffic \(A\.U\)"):
        parse_spec({**data, "addresses": "ipv6"})
    assert parse_spec({**data, "addresses": "dual"}).addresses == "dual"
    data = small_spec("fam").model_dump(mode="json", exclude_none=True)
    data["sites"][1]["isps"][0]["address"] = "fd00::1"
    with pytest.raises(SpecError, match="address: the testbed gives its links their addresses"):
        parse_spec(data)


def test_the_address_plan_per_family():
    v4, v6, dual = (Testbed(small_spec("fam", addresses=a)) for a in ("ipv4", "ipv6", "dual"))
    assert v4.address("A", "U") == "10.1.0.1" and v4.address("B", "O") == "10.2.1.1"
    assert v6.address("A", "U") == "fd00:1::1" and v6.address("B", "O") == "fd00:2:1::1"
    assert v6._link("B", "O").gateway == "fd00:2:1::fe"
    with pytest.raises(KeyError, match="no IPv4 address"):
        v6.address("A", "U", 4)
    assert dual.address("A", "T") == "fd00:1:1::1"  # probes over IPv6
    assert dual.address("A", "T", 4) == "10.1.1.1"
    # the delay line knows every family's pair, with the same conditions
    cfg = {(p["src"], p["dst"]): p["delay_ms"] for p in dual._delayline_config()["paths"]}
    assert cfg[("10.1.0.1", "10.2.1.1")] == cfg[("fd00:1::1", "fd00:2:1::1")] == 10.0
    assert ("fd00:2:1::1", "fd00:1::1") in cfg and len(cfg) == 16
    assert _packed("fd00:2:1::1") == socket.inet_pton(socket.AF_INET6, "fd00:2:1::1")
    assert _packed("10.2.1.1") == bytes([10, 2, 1, 1])


def _attrs(nested: bytes) -> dict[int, bytes]:
    return upm._parse_attrs(nested[4:])


def test_the_path_manager_speaks_both_families():
    a6 = _attrs(upm.addr_attr(upm.MPTCP_PM_ATTR_ADDR, "fd00:1::1", addr_id=3, port=5201))
    assert struct.unpack("=H", a6[upm.MPTCP_PM_ADDR_ATTR_FAMILY][:2])[0] == socket.AF_INET6
    assert a6[upm.MPTCP_PM_ADDR_ATTR_ADDR6] == socket.inet_pton(socket.AF_INET6, "fd00:1::1")
    assert upm.MPTCP_PM_ADDR_ATTR_ADDR4 not in a6
    a4 = _attrs(upm.addr_attr(upm.MPTCP_PM_ATTR_ADDR, "10.1.0.1"))
    assert struct.unpack("=H", a4[upm.MPTCP_PM_ADDR_ATTR_FAMILY][:2])[0] == socket.AF_INET
    assert a4[upm.MPTCP_PM_ADDR_ATTR_ADDR4] == socket.inet_aton("10.1.0.1")
    ev = upm.decode_event({
        upm.ATTR_SADDR6: socket.inet_pton(socket.AF_INET6, "fd00:1::1"),
        upm.ATTR_DADDR6: socket.inet_pton(socket.AF_INET6, "::ffff:10.2.0.1")})
    assert ev == {"saddr": "fd00:1::1", "daddr": "10.2.0.1"}  # a mapped peer as IPv4


def test_isp_option_takes_ipv6_and_refuses_what_no_probe_could_use():
    """`site add`'s ISP syntax less the rates (LABEL@ADDRESS, LABEL@INTERFACE); the older
    LABEL=ADDRESS and LABEL=@INTERFACE read the same."""
    for new, old in [("K@2001:DB8::2", "K=2001:DB8::2"), ("K@192.0.2.7", "K=192.0.2.7"),
                     ("K@eth1", "K=@eth1")]:
        assert parse_isp_option(new) == parse_isp_option(old)
    assert parse_isp_option("K@2001:DB8::2") == ("K", "2001:db8::2")
    assert parse_isp_option("K@192.0.2.7") == ("K", "192.0.2.7")
    assert parse_isp_option("K@eth1") == ("K", "@eth1")
    for bad, says in [("K@fe80::1", "link-local"), ("K@::ffff:192.0.2.7", "IPv4-mapped"),
                      ("K@ff02::1", "not a host's address"), ("K@::", "not a host's address"),
                      ("K@2001:db8::/64", "neither an IPv4 or IPv6 address"),
                      ("K@[2001:db8::2]", "neither"), ("K=fe80::1", "link-local"),
                      ("K", "expected LABEL@ADDRESS or LABEL@INTERFACE"),
                      ("K@", "expected LABEL@ADDRESS"), ("@eth1", "expected LABEL@ADDRESS"),
                      ("K:1000:1000@eth1", "a worker takes no rates"),
                      ("K@eth 1", "not an interface name")]:
        with pytest.raises(ValueError, match=re.escape(says)):
            parse_isp_option(bad)


def test_sites_of_two_families_cannot_probe_each_other():
    pair = HostPair(None, None, {"K": "10.0.0.1"}, {"C": "2001:db8::2"}, userspace_pm=True)
    with pytest.raises(CapabilityError, match="sender's ISP addresses are IPv4, the "
                                              "receiver's IPv6"):
        plan_subflows(pair, MeasurementRequest(sender="A", receiver="B"))
    same = HostPair(None, None, {"K": "2001:db8::1"}, {"C": "2001:db8::2"}, userspace_pm=True)
    assert plan_subflows(same, MeasurementRequest(sender="A", receiver="B")).server_addr == \
        "2001:db8::2"


def test_netperfmeter_brackets_an_ipv6_address():
    assert _host_port("fd00:2::1", 9000) == "[fd00:2::1]:9000"
    assert _host_port("10.2.0.1", 9000) == "10.2.0.1:9000"
