"""A site's long-lived paced receiver (`probes.tools.paced_server`) on this host's own stack: one
start serves probe after probe, each with its own buffer; a dead one is started again; it stops
with `stop_all`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from probes.netns import pid_alive
from probes.tools import paced_server
from probes.tools.paced import TOOL, clock_offset

pytestmark = pytest.mark.slow  # processes of its own


def probe(port: int, buffer: int) -> dict:
    out = subprocess.run([sys.executable, TOOL, "send", "--connect", "127.0.0.1", "--port",
                          str(port), "--rate", "50", "--size", "3000", "--duration", "0.4",
                          "--buffer", str(buffer), "--sync", "3"],
                         capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_one_receiver_serves_probe_after_probe_and_is_started_again_when_dead():
    try:
        receiver, started = paced_server.ensure()
        assert started and receiver.starts == 1
        first = probe(receiver.port, 65536)
        again, started = paced_server.ensure()
        assert again is receiver and not started  # no start for the second probe
        second = probe(receiver.port, 0)
        for sent, asked in ((first, 65536), (second, 0)):
            got = sent["receiver"]
            assert [f[0] for f in got["frames"]] == list(range(20)) and got["eof"]
            assert got["buffers"]["set"] == asked  # the receiver listened anew with it
            assert len(sent["sync"]["before"]) == len(sent["sync"]["after"]) == 3
            assert abs(clock_offset(sent).offset_ms) < 5  # one host, one clock
        receiver.server.kill()
        revived, started = paced_server.ensure()
        assert started and revived.starts == 2 and revived.alive()
        assert probe(revived.port, 0)["receiver"]["eof"]
        assert paced_server.stop_all() == 1
        assert not pid_alive(revived.server.pid)
    finally:
        paced_server.stop_all()  # whatever failed above: no receiver left
