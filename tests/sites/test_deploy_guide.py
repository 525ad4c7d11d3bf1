"""docs/deploy.md, run: every command block of the guide, taken from the guide itself, on three
network namespaces standing for its three hosts. The control host's namespace holds the guide's
address (192.0.2.10) and answers to its name (control.example.net, through each namespace's own
/etc/hosts that `ip netns exec` mounts); each site's namespace has its ISP interfaces named as the
guide names them (eth1, eth2), linked through a routing core to the other site's, and a link of
its own to the control host. Only the guide's two path placeholders are replaced (`/etc/mpcoa`,
`/run/mpcoa`: a folder per host). PostgreSQL is a private server of this test (initdb in the
control namespace, the guide's configuration lines as its options) on the guide's port; Redis,
the API, Caddy, the control worker, beat and the site workers are started by the guide's own
blocks. The apply must change the sites' sysctls and endpoints; the rollback must put back every
value."""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import PrivatePostgres
from tests.processes import stop_group
from tests.support import real_clock_env, wait_for

from . import guide_blocks as gb
from . import threehosts as th

pytestmark = [pytest.mark.netns, pytest.mark.postgres, pytest.mark.broker]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SITES = {"SRL": ["K", "U"], "HU": ["C", "M"]}  # the guide's sites and ISP labels
CONTROL_ADDR, CONTROL_NAME = "192.0.2.10", "control.example.net"
MIB = 1 << 20
BASE = 8  # addresses of their own beside the other three-host modules (0 and 4)
#: the guide's blocks this machine cannot run, and why: asserted, so a new one is not ignored
NOT_HERE = {"control-compose": "no Docker engine", "site-compose": "no Docker engine"}
#: what each background block must show before the next block runs
READY_PORT = {"redis": 6379, "api": 8000, "caddy": 443}
READY_LOG = {"control-worker": "ready.", "beat": "beat: Starting", "worker": "ready."}
#: the per-namespace settings an apply may change (the host-wide ones it must not touch here)
SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
           "net.mptcp.enabled", "net.mptcp.path_manager")


class Hosts:
    """The three "hosts": namespaces, a folder each for /etc/mpcoa and /run/mpcoa."""

    def __init__(self) -> None:
        self.tag = os.urandom(2).hex()
        self.root = Path(tempfile.mkdtemp(prefix="mpcoa-deploy-"))
        self.root.chmod(0o755)  # PostgreSQL's user reads its files under the control's folder
        self.ns = {"control": f"m3{self.tag}k"}
        # Site names of this run: another test's (or person's) emulated testbed with sites named
        # SRL and HU may be up on this machine, and an apply is refused when both a testbed
        # and the site workers have a site (docs/deploy.md says so)
        self.names = {site: f"{site}{self.tag}" for site in SITES}
        self.net: th.Network | None = None

    def etc(self, host: str) -> Path:
        return self.root / host / "etc"

    def run(self, host: str) -> Path:
        return self.root / host / "run"

    def build(self) -> None:
        ctl = self.ns["control"]
        th.sh("ip", "netns", "add", ctl)
        th.sh("ip", "-n", ctl, "link", "set", "lo", "up")
        th.sh("ip", "-n", ctl, "addr", "add", f"{CONTROL_ADDR}/32", "dev", "lo")
        self.net = th.build(self.tag, {self.names[s]: labels for s, labels in SITES.items()},
                            base=BASE)
        for i, (site, host) in enumerate(zip(SITES, self.net.hosts.values(), strict=True)):
            self.ns[site] = host.ns
            # the management link's far end is the control host, not this machine
            link = f"m3{self.tag}{i}r"
            th.sh("ip", "link", "set", link, "netns", ctl)
            th.sh("ip", "-n", ctl, "addr", "add", f"{host.mgmt_root}/24", "dev", link)
            th.sh("ip", "-n", ctl, "link", "set", link, "up")
            th.sh("ip", "-n", host.ns, "route", "add", f"{CONTROL_ADDR}/32", "via",
                  host.mgmt_root)
            for j in range(len(SITES[site])):  # the guide's interface names
                th.sh("ip", "-n", host.ns, "link", "set", f"m3{self.tag}{i}{j}s", "name",
                      f"eth{j + 1}")
        for host, ns in self.ns.items():
            hosts = Path("/etc/netns") / ns / "hosts"
            hosts.parent.mkdir(parents=True, exist_ok=True)
            hosts.write_text(f"127.0.0.1 localhost\n{CONTROL_ADDR} {CONTROL_NAME}\n")
            for folder in (self.etc(host), self.run(host)):
                folder.mkdir(parents=True)
                folder.chmod(0o755)

    def destroy(self) -> None:
        if self.net is not None:
            th.destroy(self.net)
        ctl = self.ns["control"]
        for pid in th.ns_pids(ctl):
            th.sh("kill", "-9", str(pid), check=False)
        th.sh("ip", "netns", "del", ctl, check=False)
        for ns in self.ns.values():
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)


class ControlPostgres(PrivatePostgres):
    """A private PostgreSQL run in the control host's namespace, on the guide's port."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        super().__init__()
        self.port = 5432  # the control namespace's own port space

    def _as_postgres(self, argv: list[str]) -> None:
        subprocess.run(["ip", "netns", "exec", self.ns, "runuser", "-u", "postgres", "--",
                        *argv], check=True, capture_output=True, timeout=120)


class Guide:
    """Runs the guide's blocks on their hosts, in order; keeps the background ones for the
    teardown."""

    def __init__(self, hosts: Hosts) -> None:
        self.hosts = hosts
        self.prefix: dict[str, str] = {}
        self.env_extra: dict[str, dict[str, str]] = {h: {} for h in hosts.ns}
        self.procs: list[subprocess.Popen] = []
        self.pg: ControlPostgres | None = None

    def env(self, host: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MPCOA_", "PG", "VIRTUAL_ENV"))}
        env.update({"PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
                    "HOME": str(self.hosts.etc(host)), **self.env_extra[host]})
        return env

    def script(self, block: gb.Block) -> str:
        body = gb.substitute(block.body, self.hosts.etc(block.host), self.hosts.run(block.host),
                             self.hosts.names)
        return "\n".join(p for p in (self.prefix.get(block.host), body) if p)

    def run(self, block: gb.Block, timeout: float = 300) -> str:
        argv = ["ip", "netns", "exec", self.hosts.ns[block.host], "bash", "-ec",
                self.script(block)]
        done = subprocess.run(argv, cwd=REPO, env=self.env(block.host), capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, (
            f"docs/deploy.md, block {block.host} {block.name} exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n{self.logs()}")
        return done.stdout

    def start(self, block: gb.Block) -> Path:
        log = self.hosts.root / f"{block.host}-{block.name}.log"
        prefix = self.prefix.get(block.host)
        body = gb.substitute(block.body, self.hosts.etc(block.host), self.hosts.run(block.host),
                             self.hosts.names)
        script = (f"{prefix}\n" if prefix else "") + f"exec {body}"
        with open(log, "w") as out:
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", self.hosts.ns[block.host], "bash", "-ec", script],
                cwd=REPO, env=real_clock_env(self.env(block.host)) if block.name == "redis"
                else self.env(block.host), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True))
        return log

    def ready(self, block: gb.Block, log: Path) -> None:
        proc = self.procs[-1]

        def up() -> bool:
            assert proc.poll() is None, f"{block.host} {block.name} ended:\n{log.read_text()}"
            if block.name in READY_PORT:
                ss = th.sh("ip", "netns", "exec", self.hosts.ns[block.host], "ss", "-Htln",
                           f"sport = :{READY_PORT[block.name]}", check=False).stdout
                return bool(ss.strip())
            return READY_LOG[block.name] in log.read_text()

        wait_for(up, 120, f"docs/deploy.md's {block.host} {block.name} to be up")

    def start_postgres(self, block: gb.Block) -> None:
        """The server with the guide's configuration lines as its options (Debian's cluster
        is the machine's; this one is the test's own)."""
        self.pg = ControlPostgres(self.hosts.ns["control"])
        etc = self.hosts.etc("control")
        opts = [gb.substitute(o, etc, self.hosts.run("control"), self.hosts.names)
                for o in gb.server_options(block)]
        self.pg.start(*(f"-c {shlex.quote(o)}" for o in opts))
        # psql's `runuser -u postgres -- psql` finds this server's socket
        self.env_extra["control"].update({"PGHOST": str(self.pg.root), "PGPORT": "5432"})

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_group(proc, grace_s=15)
        if self.pg is not None:
            self.pg.destroy()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}"
                         for p in sorted(self.hosts.root.glob("*.log")))


def _implicit(endpoint: dict) -> bool:
    return bool(endpoint.get("implicit")) or bool(int(endpoint.get("rawflags", "0"), 16) & 0x10)


def _unmapped(address: str) -> str:
    ip = ipaddress.ip_address(address)
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def assert_endpoints_restored(before: list, applied: list, after: list) -> None:
    """The configured endpoints exactly as before; no endpoint that was not there before (never
    a configured one for an implicit one); an implicit one gone only where the apply configured
    its address or its id (the kernel refuses an endpoint with an id beside it, and no one can
    re-create an implicit one: that address is left unconfigured, as it was)."""
    assert [e for e in after if not _implicit(e)] == [e for e in before if not _implicit(e)], (
        before, after)
    assert all(e in before for e in after), (before, after)
    taken = [e for e in applied if not _implicit(e)]
    for gone in (e for e in before if e not in after):
        assert _implicit(gone) and any(
            _unmapped(t["address"]) == _unmapped(gone["address"]) or t["id"] == gone["id"]
            for t in taken), (gone, applied)


def site_state(ns: str) -> dict[str, Any]:
    """The values an apply may change on a site, read in its namespace."""
    state = {key: th.sh("ip", "netns", "exec", ns, "sysctl", "-n", key, check=False).stdout.strip()
             for key in SYSCTLS}
    # Implicit endpoints included (flag 0x10, made by the kernel for an address a subflow used
    # that no endpoint names: the probes leave them on the sites; `assert_endpoints_restored`)
    state["endpoints"] = json.loads(
        th.sh("ip", "-n", ns, "-j", "mptcp", "endpoint", "show").stdout or "[]")
    state["limits"] = th.sh("ip", "-n", ns, "mptcp", "limits", "show").stdout.strip()
    return state


def assert_secure_login(hosts: Hosts, token: str) -> None:
    """The guide's claim for the proxy: the API believes Caddy's X-Forwarded-Proto, so the
    dashboard's login over https sets a `Secure` cookie."""
    origin = f"https://{CONTROL_NAME}"
    done = th.sh("ip", "netns", "exec", hosts.ns["SRL"], "curl", "-sS", "-o", "/dev/null",
                 "-D", "-", "--cacert", str(hosts.etc("SRL") / "tls" / "ca.crt"),
                 "-H", f"Origin: {origin}", "--data-urlencode", f"token={token}",
                 f"{origin}/dashboard/login", check=False)
    cookies = [h for h in done.stdout.splitlines() if h.lower().startswith("set-cookie:")]
    assert cookies and all("secure" in c.lower() for c in cookies), (done.stdout, done.stderr)


@pytest.fixture
def hosts():
    h = Hosts()
    try:
        h.build()
        yield h
    finally:
        h.destroy()
        left = [ns for ns in th.sh("ip", "netns", "list").stdout.split() if f"m3{h.tag}" in ns]
        assert not left


def test_the_deployment_guide_runs_from_certificates_to_a_rollback(hosts):
    started = time.monotonic()
    # The answer's buffer is at most the largest one probed (the campaign extends its grid up
    # to 0.75 MiB): below that, a site worker would have to raise the host-wide rmem_max/wmem_max,
    # which a namespace cannot (and this test must not)
    for key in ("rmem_max", "wmem_max"):
        have = int(Path(f"/proc/sys/net/core/{key}").read_text())
        assert have >= MIB, f"net.core.{key} is {have}: this test needs 1 MiB or more"
    blocks = gb.blocks()
    assert {b.name: b.flags.lstrip(": ") for b in blocks if b.host == "not-here"}.keys() \
        == NOT_HERE.keys()
    assert {b.host for b in blocks} == {"control", *SITES, "not-here"}
    guide = Guide(hosts)
    before: dict[str, dict[str, Any]] = {}
    applied: dict[str, dict[str, str]] = {}
    ran: list[str] = []
    took: dict[str, float] = {}
    try:
        for block in blocks:
            if block.host == "not-here":
                continue
            ran.append(f"{block.host} {block.name}")
            t0 = time.monotonic()
            if block.prefix:
                guide.prefix[block.host] = gb.substitute(
                    block.body, hosts.etc(block.host), hosts.run(block.host), hosts.names)
            elif block.server_options:
                guide.start_postgres(block)
            elif block.background:
                guide.ready(block, guide.start(block))
            elif block.name == "certificates":
                guide.run(block)
                for site in SITES:  # "copy ca.crt (only it) to each site host"
                    (hosts.etc(site) / "tls").mkdir()
                    shutil.copy(hosts.etc("control") / "tls" / "ca.crt",
                                hosts.etc(site) / "tls" / "ca.crt")
            elif block.name == "tokens":
                out = guide.run(block).split()
                write_token, read_token = out[-2], out[-1]
                for host in guide.env_extra:
                    guide.env_extra[host]["TOKEN"] = read_token
                assert write_token != read_token
            elif block.name == "apply":
                before = {s: site_state(hosts.ns[s]) for s in SITES}
                out = guide.run(block)
                assert "applied" in out, out
                applied = {s: site_state(hosts.ns[s]) for s in SITES}
            elif block.name == "rollback":
                out = guide.run(block)
                assert "rolled_back" in out, out
            elif block.name == "check" and block.host == "SRL":
                out = guide.run(block)
                assert '"items"' in out, out  # GET /sites over https, with the read token
                assert_secure_login(hosts, guide.env_extra["SRL"]["TOKEN"])
            elif block.name == "calibrate":
                print(guide.run(block))
            else:
                guide.run(block)
            took[ran[-1]] = time.monotonic() - t0
        after = {s: site_state(hosts.ns[s]) for s in SITES}
    finally:
        guide.stop()
    print(f"docs/deploy.md: {len(ran)} blocks run in {time.monotonic() - started:.0f} s; "
          + ", ".join(f"{k} {v:.1f} s" for k, v in took.items()))
    assert ran[0] == "control certificates" and ran[-1] == "control rollback", ran
    # the apply changed each site: the sender's congestion control and the endpoints on both;
    # the autotuning ceiling is never lowered below the host's own unless asked (the guide
    # does not ask)
    assert applied["SRL"]["net.ipv4.tcp_congestion_control"] == "reno", applied
    for site in SITES:
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            assert int(applied[site][key].split()[2]) >= int(before[site][key].split()[2]), \
                (site, key, applied[site][key], before[site][key])
        assert applied[site]["endpoints"] != before[site]["endpoints"], applied
    # and the rollback put every value back
    for site in SITES:
        assert_endpoints_restored(before[site].pop("endpoints"), applied[site]["endpoints"],
                                  after[site].pop("endpoints"))
    assert after == before, {s: {k: (v, after[s].get(k)) for k, v in before[s].items()
                                 if after[s].get(k) != v} for s in SITES}
