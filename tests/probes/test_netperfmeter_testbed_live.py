"""NetPerfMeter 2.x on the emulated testbed, on the shipped SRL-HU scenario (thin uplinks, about
300 ms of RTT, eight subflows): a small buffer asked is read back on both ends and the run has an
interval after its warm-up. Needs NetPerfMeter 2.x (MPCOA_NETPERFMETER): deselected without it
(tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from probes.base import MeasurementRequest
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import parse_spec, scenario_path
from tests.probes.conftest import assert_nothing_left, unique_name

pytestmark = [pytest.mark.netns, pytest.mark.netperfmeter]

BUFFER = 16384  # below the kernel's default receive buffer (tcp_rmem: 131072)


@pytest.fixture(scope="module")
def long_bed() -> Iterator[tbmod.Testbed]:
    name = unique_name("n")
    data = yaml.safe_load(scenario_path("srl-hu").read_text())
    try:
        yield tbmod.up(parse_spec({**data, "name": name}))
    finally:
        st = tbmod.testbed_status(name)
        tbmod.down(name)
        assert_nothing_left(name, st.get("delayline_pid"))


def test_a_small_buffer_is_read_back_on_the_passive_side(long_bed):
    """The passive side sets the asked size on its accepted socket only when the flow
    identifies itself; a receiver's ``ss`` sample before that sees the kernel's defaults
    (before the fix every such probe here failed the read-back: 131072 bytes read, 32768
    asked). The check reads the socket as the run had it."""
    sender, receiver = (s.name for s in long_bed.spec.sites)
    r = long_bed.measure(MeasurementRequest(
        sender=sender, receiver=receiver, cc="cubic", duration_s=3, buffer_bytes=BUFFER),
        backend="netperfmeter")
    assert r.tool == "netperfmeter" and r.tool_version.startswith("2.")
    assert r.buffers_set == {f"{end}_{k}": BUFFER for end in ("sender", "receiver")
                             for k in ("sndbuf", "rcvbuf")}
    assert r.effective_buffers == {f"{end}_{k}": 2 * BUFFER for end in ("sender", "receiver")
                                   for k in ("sndbuf", "rcvbuf")}, r.effective_buffers
    assert r.buffer_problems() == []
    # a 3 s probe's last full second is in the series: an interval after the 1.5 s warm-up
    assert r.failure_reason() is None, r.failure_reason()
    assert len(r.goodput_series) >= 3, r.goodput_series
    assert r.raw["results"]["series"] and "passive_log" in r.raw


def test_the_active_side_ends_at_its_logs_last_line_and_a_spare_passive_side_serves_the_next(
        long_bed):
    """2.0.10's active side, once its log says "Logging finished.", only joins a thread that
    sleeps to its next one-second tick: it is ended there, its results whole. With spares, the
    passive side of the second probe is the one started when the first ended (its port), and
    it measures as a fresh one does."""
    from probes.tools import npm_spare
    from probes.tools.netperfmeter import ACTIVE_DONE

    sender, receiver = (s.name for s in long_bed.spec.sites)
    request = MeasurementRequest(sender=sender, receiver=receiver, cc="cubic", duration_s=3,
                                 buffer_bytes=BUFFER)
    try:
        first = long_bed.measure(request, backend="netperfmeter", spare=True)
        pair = long_bed.context(request)
        spare = npm_spare._spares[(pair.sender_ns, pair.receiver_ns, npm_spare_binary(first))]
        second = long_bed.measure(request, backend="netperfmeter", spare=True)
    finally:
        npm_spare.discard_all()
    for r in (first, second):
        assert r.raw["active_ended_after_log"] is True
        assert r.artifacts["active.log"].decode().rstrip().endswith(ACTIVE_DONE)
        assert r.failure_reason() is None, r.failure_reason()
        assert r.raw["results"]["received_bytes"] > 0 and r.raw["passive_log"]
        # the run's files are kept as artifacts; their folder does not outlive the probe
        assert any(name.startswith("run-passive") for name in r.artifacts)
        assert not Path(r.raw["outdir"]).exists()
    assert second.raw["passive_argv"] == spare.argv
    assert str(spare.port) in second.raw["passive_argv"]
    assert spare.server.proc.poll() is not None  # ended with its probe
    assert npm_spare._spares == {}


def npm_spare_binary(result) -> str:
    return result.raw["active_argv"][0]
