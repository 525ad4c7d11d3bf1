"""The kernel's implicit MPTCP endpoints through an apply and its rollback, for real.

An implicit endpoint (flag 0x10, `rawflags 10` in iproute2 6.1) is made by the kernel for an
address a subflow used that no endpoint names; no one can create one. Here the client of an
MPTCP connection gets one: the server announces a second address, and the client's subflow to it
leaves from the client's second address, which no endpoint names. An apply leaves it alone (the
table and limits come back exactly after apply, re-apply, rollback); an apply that configures
its address takes its place, and the rollback leaves that address unconfigured, never as a plain
configured endpoint.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest

from probes.site import apply as siteapply
from tests.support import wait_for

pytestmark = pytest.mark.netns

SERVER = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5001)); s.listen(); print("ready", flush=True)
c, _ = s.accept()
while c.recv(65536):
    pass
"""
CLIENT = """
import socket, sys, time
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
c.connect(("10.9.1.2", 5001))
end = time.time() + float(sys.argv[1])
while time.time() < end:
    c.send(b"x" * 1000); time.sleep(0.01)
c.close()
"""


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture
def pair():
    """Two namespaces, client and server, joined by two links (10.9.1.0/24, 10.9.2.0/24)."""
    tag = secrets.token_hex(3)
    client, server = f"imc{tag}", f"ims{tag}"
    try:
        for ns in (client, server):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.mptcp.enabled=1")
            sh("ip", "-n", ns, "mptcp", "limits", "set", "subflows", "4",
               "add_addr_accepted", "4")
        for n in (1, 2):
            a, b = f"im{n}a{tag}", f"im{n}b{tag}"
            sh("ip", "link", "add", a, "netns", client, "type", "veth", "peer", "name", b,
               "netns", server)
            sh("ip", "-n", client, "addr", "add", f"10.9.{n}.1/24", "dev", a)
            sh("ip", "-n", server, "addr", "add", f"10.9.{n}.2/24", "dev", b)
            sh("ip", "-n", client, "link", "set", a, "up")
            sh("ip", "-n", server, "link", "set", b, "up")
        sh("ip", "-n", server, "mptcp", "endpoint", "add", "10.9.2.2", "id", "1", "signal")
        yield client, server
    finally:
        for ns in (client, server):
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                sh("kill", pid, check=False)
            sh("ip", "netns", "del", ns, check=False)


def endpoints(ns: str) -> list[dict]:
    return json.loads(sh("ip", "-n", ns, "-j", "mptcp", "endpoint", "show").stdout or "[]")


def limits(ns: str) -> str:
    return sh("ip", "-n", ns, "mptcp", "limits", "show").stdout


def make_implicit(client: str, server: str) -> dict:
    """One MPTCP connection: the client's subflow to the announced 10.9.2.2 leaves from
    10.9.2.1, which no endpoint names; the kernel makes an implicit endpoint for it."""
    srv = subprocess.Popen(["ip", "netns", "exec", server, sys.executable, "-c", SERVER],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        sh("ip", "netns", "exec", client, sys.executable, "-c", CLIENT, "1.5")
    finally:
        srv.kill()
        srv.wait(timeout=10)
    made = wait_for(lambda: [e for e in endpoints(client)
                             if int(e.get("rawflags", "0"), 16) & 0x10 or e.get("implicit")],
                    10, "the kernel to make an implicit endpoint")
    return made[0]


def test_apply_reapply_rollback_leave_an_implicit_endpoint_exactly_as_found(pair, tmp_path):
    client, server = pair
    implicit = make_implicit(client, server)
    assert implicit["address"] == "10.9.2.1"
    before_eps, before_limits = endpoints(client), limits(client)

    free_id = max(e["id"] for e in before_eps) + 1
    first = {"endpoints": [{"id": free_id, "address": "10.9.1.1", "subflow": True}],
             "limits": {"subflows": 2, "add_addr_accepted": 1}}
    journal = siteapply.apply(first, ns=client, root=tmp_path, label="apply 1")
    assert journal["implicit_endpoints"] == [
        {"id": implicit["id"], "address": "10.9.2.1", "implicit": True}]
    assert journal["implicit_replaced"] == []
    assert implicit in endpoints(client)  # left alone
    # the endpoints step journals configuration only: nothing to re-create for the implicit one
    step = next(s for s in journal["steps"] if s["kind"] == "endpoints")
    assert step["before"] == []

    second = {"endpoints": [{"id": free_id, "address": "10.9.1.1", "subflow": True,
                             "backup": True}], "limits": {"subflows": 3}}
    siteapply.apply(second, ns=client, root=tmp_path, label="apply 2")
    assert implicit in endpoints(client)

    out = siteapply.rollback(ns=client, root=tmp_path, label="apply 2")
    assert out["outcome"] == "rolled_back"
    assert endpoints(client) == before_eps
    assert limits(client) == before_limits


def test_an_apply_configuring_its_address_replaces_it_and_the_rollback_leaves_it_unconfigured(
        pair, tmp_path):
    client, server = pair
    implicit = make_implicit(client, server)
    before_limits = limits(client)
    others = [e for e in endpoints(client) if e != implicit]

    # the same address under the same id: the kernel refuses either beside the implicit one
    target = {"endpoints": [{"id": implicit["id"], "address": "10.9.2.1", "subflow": True},
                            {"id": implicit["id"] + 1, "address": "10.9.1.1", "subflow": True}],
              "limits": {"subflows": 2}}
    journal = siteapply.apply(target, ns=client, root=tmp_path, label="apply 1")
    assert journal["implicit_replaced"] == [
        {"id": implicit["id"], "address": implicit["address"], "implicit": True}]
    now = {e["address"]: e for e in endpoints(client)}
    configured = now["10.9.2.1"]
    assert configured["id"] == implicit["id"] and configured.get("subflow") is True
    assert "rawflags" not in configured and "implicit" not in configured
    siteapply.apply(target, ns=client, root=tmp_path, label="apply 2")  # again: no change

    assert siteapply.rollback(ns=client, root=tmp_path)["outcome"] == "rolled_back"
    assert endpoints(client) == others  # 10.9.2.1 unconfigured: no plain endpoint for it
    assert limits(client) == before_limits
