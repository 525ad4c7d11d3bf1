"""Three sites as three "hosts" on one kernel (issue 11 item 6): each site a network namespace
holding its ISP interfaces (veth pairs into a core namespace that routes between the sites,
rates shaped with tbf) and a management interface (a veth into the root namespace, through
which alone its worker reaches PostgreSQL and Redis, via a small TCP forwarder)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import threading
from dataclasses import dataclass, field

RATE = "20mbit"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check)


@dataclass
class Host:
    name: str  # site name
    ns: str
    isps: dict[str, str]  # label -> address
    mgmt_root: str  # the root namespace's address on this host's management link


@dataclass
class Network:
    tag: str
    core: str
    hosts: dict[str, Host] = field(default_factory=dict)

    def namespaces(self) -> list[str]:
        return [self.core, *(h.ns for h in self.hosts.values())]


def build(tag: str, sites: dict[str, list[str]], base: int = 0) -> Network:
    """`sites`: site name -> ISP labels. Site i, ISP j: 10.(100+base+i).j.2 on the site, .1 on
    the core; management 10.(200+base+i).0.2 on the site, .1 in the root namespace. Another
    `base` (a multiple of 4) gives a set-up that can run beside this one."""
    net = Network(tag, f"m3{tag}c")
    sh("ip", "netns", "add", net.core)
    sh("ip", "-n", net.core, "link", "set", "lo", "up")
    sh("ip", "netns", "exec", net.core, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    every = f"10.{100 + base}.0.0/14"  # the sites' ISP networks
    for i, (site, labels) in enumerate(sites.items()):
        ns = f"m3{tag}{i}"
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        isps: dict[str, str] = {}
        for j, label in enumerate(labels):
            sub = f"10.{100 + base + i}.{j}"
            a, b = f"m3{tag}{i}{j}s", f"m3{tag}{i}{j}c"
            sh("ip", "link", "add", a, "netns", ns, "type", "veth", "peer", "name", b,
               "netns", net.core)
            sh("ip", "-n", ns, "addr", "add", f"{sub}.2/24", "dev", a)
            sh("ip", "-n", net.core, "addr", "add", f"{sub}.1/24", "dev", b)
            for n, dev in ((ns, a), (net.core, b)):
                sh("ip", "-n", n, "link", "set", dev, "up")
                sh("ip", "netns", "exec", n, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                   "rate", RATE, "burst", "32kbit", "latency", "100ms")
            # source routing: each ISP address leaves through its own interface
            table = str(100 + j)
            sh("ip", "-n", ns, "rule", "add", "from", f"{sub}.2", "table", table)
            sh("ip", "-n", ns, "route", "add", every, "via", f"{sub}.1", "dev", a,
               "table", table)
            if j == 0:
                sh("ip", "-n", ns, "route", "add", every, "via", f"{sub}.1", "dev", a)
            isps[label] = f"{sub}.2"
        m_site, m_root = f"m3{tag}{i}m", f"m3{tag}{i}r"
        sh("ip", "link", "add", m_site, "netns", ns, "type", "veth", "peer", "name", m_root)
        sh("ip", "-n", ns, "addr", "add", f"10.{200 + base + i}.0.2/24", "dev", m_site)
        sh("ip", "addr", "add", f"10.{200 + base + i}.0.1/24", "dev", m_root)
        sh("ip", "-n", ns, "link", "set", m_site, "up")
        sh("ip", "link", "set", m_root, "up")
        net.hosts[site] = Host(site, ns, isps, f"10.{200 + base + i}.0.1")
    return net


def destroy(net: Network) -> None:
    for i, _host in enumerate(net.hosts.values()):
        sh("ip", "link", "del", f"m3{net.tag}{i}r", check=False)
    for ns in net.namespaces():
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            with contextlib.suppress(Exception):
                sh("kill", "-9", pid, check=False)
        sh("ip", "netns", "del", ns, check=False)


def ns_pids(ns: str) -> list[int]:
    return [int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split()]


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


class Forwarder:
    """TCP forwarding from management addresses to services on 127.0.0.1 (an asyncio loop in a
    thread): the sites reach PostgreSQL and Redis through their management links only."""

    def __init__(self, binds: list[str], ports: list[int]) -> None:
        self.binds, self.ports = binds, ports
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.servers: list[asyncio.base_events.Server] = []

    async def _pipe(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _handler(self, port: int):
        async def handle(reader, writer) -> None:
            try:
                r2, w2 = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(self._pipe(reader, w2), self._pipe(r2, writer))
        return handle

    def start(self) -> Forwarder:
        self.thread.start()
        for addr in self.binds:
            for port in self.ports:
                fut = asyncio.run_coroutine_threadsafe(
                    asyncio.start_server(self._handler(port), addr, port,
                                         family=socket.AF_INET, reuse_address=True), self.loop)
                self.servers.append(fut.result(timeout=10))
        return self

    def stop(self) -> None:
        async def close() -> None:
            for s in self.servers:
                s.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
