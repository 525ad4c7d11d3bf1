"""Which probe tool runs a probe (`probes.tools.choice`): what each tool allows on a host, and the
campaign's choice (auto, netperfmeter, iperf3) for bulk and stream probes."""

from __future__ import annotations

import pytest

from probes.base import CapabilityError
from probes.tools.choice import allows, choose, inventory, notes
from probes.tools.paced_tool import VERSION
from probes.tools.plugins.netperfmeter import is_netperfmeter_2

DEBIAN = {"iperf3": "3.12", "mptcpize": "present", "netperfmeter": None, "paced": VERSION}
NPM2 = {**DEBIAN, "netperfmeter": "2.0.10"}
NPM_ONLY = {"iperf3": None, "mptcpize": None, "netperfmeter": "2.0.10", "paced": VERSION}


def test_what_each_tool_allows():
    assert allows(DEBIAN) == {"iperf3": ["bulk"], "netperfmeter": [], "paced": ["frames"]}
    assert allows(NPM2)["netperfmeter"] == ["bulk", "frames"]
    # iperf3 3.12 has no --mptcp: without mptcpize it measures nothing, and says why
    no_mptcpize = {**DEBIAN, "mptcpize": None}
    assert allows(no_mptcpize)["iperf3"] == []
    assert "mptcpize" in notes(no_mptcpize)[0]
    assert allows({**no_mptcpize, "iperf3": "3.16"})["iperf3"] == ["bulk"]  # native --mptcp
    # Debian 12's NetPerfMeter 1.9 runs the out-of-tree kernels' MPTCP: nothing here
    legacy = {**DEBIAN, "netperfmeter": "1.9.4"}
    assert allows(legacy)["netperfmeter"] == [] and "not 2.x" in notes(legacy)[0]
    assert [is_netperfmeter_2(v) for v in ("2.0.10", "1.9.4", "unknown", None)] == [
        True, False, False, False]


@pytest.mark.parametrize(("choice", "kind", "sides", "backend"), [
    ("auto", "bulk", [DEBIAN, DEBIAN], "iperf3"),
    ("auto", "paced", [DEBIAN, DEBIAN], "paced"),
    ("auto", "bulk", [NPM2, NPM2], "netperfmeter"),
    ("auto", "paced", [NPM2, NPM2], "netperfmeter"),
    ("auto", "bulk", [NPM2, DEBIAN], "iperf3"),  # NetPerfMeter on one site only
    ("iperf3", "bulk", [NPM2, NPM2], "iperf3"),
    ("iperf3", "paced", [NPM2, NPM2], "paced"),  # iperf3 measures no frame
    ("netperfmeter", "bulk", [NPM_ONLY, NPM_ONLY], "netperfmeter"),
    ("netperfmeter", "paced", [NPM2, NPM2], "netperfmeter"),
])
def test_the_choice(choice, kind, sides, backend):
    assert choose(choice, kind, sides) == backend


def test_what_cannot_run_names_what_to_install():
    with pytest.raises(CapabilityError, match=r"NetPerfMeter 2\.x.*MPCOA_NETPERFMETER"):
        choose("netperfmeter", "bulk", [NPM2, DEBIAN])
    no_frames = {**DEBIAN, "paced": None}
    with pytest.raises(CapabilityError, match=r"frame-level tool.*NetPerfMeter 2\.x.*paced tool"):
        choose("auto", "paced", [DEBIAN, no_frames])
    with pytest.raises(CapabilityError, match="iperf3 and mptcpize"):
        choose("auto", "bulk", [{**DEBIAN, "mptcpize": None}] * 2)
    with pytest.raises(CapabilityError, match="not one of"):
        choose("netperf", "bulk", [DEBIAN, DEBIAN])


def test_this_hosts_inventory(tmp_path):
    found = inventory(netperfmeter=str(tmp_path / "none"))
    assert found["tools"]["iperf3"] and found["tools"]["paced"] == VERSION
    assert found["tools"]["netperfmeter"] is None
    assert found["allows"]["iperf3"] == ["bulk"] and found["allows"]["netperfmeter"] == []
