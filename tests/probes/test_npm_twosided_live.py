"""NetPerfMeter two-sided with a long-lived passive node, live: the receiving site's node
serves several probes, the sending site runs the active side per probe, under subflow control,
bulk and a stream; a node that dies is started again. Needs NetPerfMeter 2.x
(MPCOA_NETPERFMETER): deselected without it (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from probes.base import MeasurementRequest, TrafficProfile
from probes.tools.netperfmeter import default_binary
from probes.tools.npm_twosided import PassiveNode, active_measure
from tests.support import wait_for

pytestmark = [pytest.mark.netns, pytest.mark.netperfmeter]


def measure(bed, node, **kw):
    request = MeasurementRequest(sender="A", receiver="B", duration_s=4, warmup_s=1, **kw)
    pair = bed.context(request)
    bed.set_direction("A", "B")
    return active_measure(request, sender_addrs=pair.sender_addrs,
                          receiver_addrs=pair.receiver_addrs, port=node.port,
                          binary=default_binary(), ns=pair.sender_ns,
                          receiver_ns=pair.receiver_ns)


def test_one_node_serves_bulk_and_stream_probes_and_comes_back(testbed2x2):
    bed = testbed2x2
    receiver = bed.context(MeasurementRequest(sender="A", receiver="B"))
    node = PassiveNode(default_binary(), receiver.receiver_addrs, ns=receiver.receiver_ns)
    node.start()
    try:
        first_pid = node.pid
        bulk = measure(bed, node, cc="cubic")
        assert bulk.tool == "netperfmeter" and bulk.tool_version.startswith("2.")
        assert bulk.raw["two_sided"] and bulk.raw["passive_node_port"] == node.port
        assert "active.log" in bulk.artifacts and not Path(bulk.raw["outdir"]).exists()
        # 12 + 6 Mbit/s of links: a real goodput, and both subflows carried it
        assert 3.0 < bulk.goodput_mbps < 19.0, bulk.goodput_mbps
        assert bulk.failure_reason() is None, bulk.failure_reason()
        # PCDC: one subflow only; the same node, no restart
        single = measure(bed, node, cc="reno", allowed_subflows=["U-D"],
                         path_manager="PCDC", buffer_bytes=1 << 20)
        assert single.failure_reason() is None, single.failure_reason()
        assert set(single.subflow_bytes) >= {"U-D"}
        stream = measure(bed, node, cc="cubic",
                         profile=TrafficProfile.paced(25, 5000, delay_budget_ms=400))
        assert stream.frames is not None and stream.frames.frames_sent > 50, stream.frames
        assert stream.frames.frames_received > 0.9 * stream.frames.frames_sent
        assert stream.frames.delay_p99_ms is not None and stream.frames.delay_p99_ms < 400
        assert node.pid == first_pid and node.restarts == 0
        # the node is killed: its supervisor starts it again and it serves the next probe
        os.killpg(first_pid, signal.SIGKILL)
        wait_for(lambda: node.restarts == 1 and node.running(), 15, "the node's restart")
        again = measure(bed, node, cc="cubic")
        assert again.failure_reason() is None and again.goodput_mbps > 3.0
    finally:
        node.stop()
    assert not node.running()
