"""The emulated multi-homed testbed: two site namespaces, a core namespace, real kernel MPTCP.

Layout for a testbed ``NAME`` (see docs/testbed.md)::

    mpcoa-NAME-site-A               mpcoa-NAME-core                 mpcoa-NAME-site-B
    isp-U 10.1.0.1/24 ==veth== s0-U 10.1.0.254      10.2.0.254 s1-C ==veth== isp-C 10.2.0.1/24
    isp-K 10.1.1.1/24 ==veth== s0-K 10.1.1.254      10.2.1.254 s1-D ==veth== isp-D 10.2.1.1/24
                                  \\-- ip rule iif s*-* -> TUN "dline" (delay line) --/

    (IPv4 shown; ``addresses: ipv6`` gives fd00:1:0::1/64 ... instead, ``dual`` both:
    probes/testbed/addresses.py)

- uplink shaping: tbf on the egress of the site's ``isp-L`` (rate = ISP up x rate_scale);
  downlink shaping: tbf on the egress of the core's ``sN-L`` (rate = ISP down x rate_scale);
- delay, loss, jitter: ``probes.testbed.delayline`` on the TUN device in the core, per (src, dst)
  pair;
- per-source routing in the sites (``ip rule from ADDR lookup 100+i``), rp_filter off everywhere;
- field conditions (``probes.testbed.conditions``): competing traffic from hosts outside the sites
  through an ISP's link (``cross``), the link's rates changed over time (``schedule``), bursty
  losses in the delay line (``loss_burst``);
- MPTCP endpoints: the sender's addresses ``subflow fullmesh``, the receiver's other addresses
  ``signal``, limits 8/8, so the in-kernel path manager builds all Ns x Mr subflows.

State lives in ``/run/mpcoa/testbeds/NAME``; ``down`` removes every namespace, device and
process the testbed made (devices die with their namespaces).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes import cc_users, environment
from probes.base import MeasurementRequest, MeasurementResult, ProbeError
from probes.netns import (
    ip,
    ip_batch,
    kill_pid,
    list_netns,
    netns_exists,
    netns_pids,
    pid_alive,
    pid_cmdline,
    run,
    sysctl_get,
    sysctl_set,
)
from probes.testbed import capacity, conditions
from probes.testbed.addresses import (
    LinkAddress,
    core_link_commands,
    endpoint_id,
    family_sysctls,
    link_addresses,
    probe_version,
    site_link_commands,
)
from probes.testbed.queues import link_queue, queue_table
from probes.testbed.spec import TestbedSpec, parse_spec

DEFAULT_STATE_ROOT = Path("/run/mpcoa/testbeds")
STATE_ROOT: Path | None = None  # a fixed folder (tests); else MPCOA_TESTBED_STATE or the default


def state_root() -> Path:
    return STATE_ROOT or Path(environment.get("testbed_state", DEFAULT_STATE_ROOT))
NS_PREFIX = "mpcoa-"
TUN_NAME = "dline"
TRANSIT_TABLE = "100"
BUFFER_MAX = 64 * 1024 * 1024  # lets a 30 MiB SO_SNDBUF sweep through (the paper's limit)
MPTCP_LIMIT = 8  # the kernel's maximum for subflows and add_addr_accepted


class TestbedError(ProbeError):
    __test__ = False


def ns_name(testbed: str, site: str | None) -> str:
    return f"{NS_PREFIX}{testbed}-core" if site is None else f"{NS_PREFIX}{testbed}-site-{site}"


def testbed_namespaces(testbed: str) -> list[str]:
    prefix = f"{NS_PREFIX}{testbed}-"
    return [n for n in list_netns() if n.startswith(prefix)]


def _kbit(v: float) -> str:
    return f"{max(1, round(v))}kbit"


@dataclass
class SiteLink:
    site: str
    site_index: int
    label: str
    index: int
    address: str
    gateway: str
    site_dev: str
    core_dev: str
    up_kbps: float
    down_kbps: float
    #: every family's address of the link (``addresses: dual`` has two); `address` and `gateway`
    #: are those of the family the probes use
    families: list[LinkAddress] = field(default_factory=list)

    def of_version(self, version: int) -> LinkAddress | None:
        return next((la for la in self.families if la.version == version), None)

    @property
    def address4(self) -> str | None:
        la = self.of_version(4)
        return la.address if la else None


@dataclass
class Testbed:
    """A running (or to-be-run) testbed built from a TestbedSpec."""

    __test__ = False
    spec: TestbedSpec
    links: list[SiteLink] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.links:
            for s_idx, site in enumerate(self.spec.sites):
                for i, isp in enumerate(site.isps):
                    fams = link_addresses(self.spec.addresses, s_idx, i)
                    probed = next(la for la in fams
                                  if la.version == probe_version(self.spec.addresses))
                    self.links.append(
                        SiteLink(
                            site=site.name,
                            site_index=s_idx,
                            label=isp.label,
                            index=i,
                            address=probed.address,
                            gateway=probed.gateway,
                            families=fams,
                            site_dev=f"isp-{isp.label}",
                            core_dev=f"s{s_idx}-{isp.label}",
                            up_kbps=isp.up_kbps * self.spec.rate_scale,
                            down_kbps=isp.down_kbps * self.spec.rate_scale,
                        )
                    )

    # ---- names -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def state_dir(self) -> Path:
        return state_root() / self.name

    @property
    def core_ns(self) -> str:
        return ns_name(self.name, None)

    def ns(self, site: str) -> str:
        self.spec.site(site)  # KeyError for an unknown site
        return ns_name(self.name, site)

    def site_links(self, site: str) -> list[SiteLink]:
        return [lk for lk in self.links if lk.site == site]

    def _link(self, site: str, label: str) -> SiteLink:
        for lk in self.links:
            if lk.site == site and lk.label == label:
                return lk
        raise KeyError(f"{site}.{label}")

    def address(self, site: str, label: str, version: int | None = None) -> str:
        """The ISP link's address in the site: the probes' family, or IPv4/IPv6 (`version`)."""
        lk = self._link(site, label)
        if version is None:
            return lk.address
        la = lk.of_version(version)
        if la is None:
            raise KeyError(f"{site}.{label}: no IPv{version} address "
                           f"(addresses: {self.spec.addresses})")
        return la.address

    # ---- queue sizing --------------------------------------------------------------------------
    def _queue_bytes(self, link: SiteLink, rate_kbps: float) -> int:
        return link_queue(self.spec, link.site_index, link.label, rate_kbps)["bytes"]

    @staticmethod
    def _burst_bytes(rate_kbps: float) -> int:
        return max(2 * 1514, int(rate_kbps * 1000 / 8 * 0.002))

    # ---- lifecycle -----------------------------------------------------------------------------
    def is_up(self) -> bool:
        st = self._read_state()
        if not st or st.get("digest") != self.spec.digest():
            return False
        needed = [self.core_ns] + [self.ns(s.name) for s in self.spec.sites]
        needed += conditions.expected_namespaces(self)
        pid = st.get("delayline_pid")
        return (all(netns_exists(n) for n in needed) and bool(pid) and self._delayline_ok(pid)
                and conditions.all_alive(st.get("field_procs", [])))

    def _delayline_ok(self, pid: int) -> bool:
        return pid_alive(pid) and "probes.testbed.delayline" in " ".join(pid_cmdline(pid))

    def _read_state(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.state_dir / "state.json").read_text())
        except (OSError, ValueError):
            return None

    def _write_state(self, extra: dict[str, Any]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        st = {"name": self.name, "digest": self.spec.digest(),
              "spec": self.spec.model_dump(mode="json")}
        st.update(extra)
        tmp = self.state_dir / "state.json.tmp"
        tmp.write_text(json.dumps(st, indent=1))
        tmp.replace(self.state_dir / "state.json")

    def up(self) -> Testbed:
        """Build the testbed; a no-op when the same spec is already up (idempotent)."""
        if self.is_up():
            return self
        down(self.name)  # a half-built or different testbed of the same name
        try:
            self._build()
        except BaseException:
            down(self.name)
            raise
        return self

    def _build(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        _raise_global_buffer_max()
        core = self.core_ns
        sites = [s.name for s in self.spec.sites]
        for n in [core] + [self.ns(s) for s in sites]:
            run(["ip", "netns", "add", n])
            ip(n, "link", "set", "lo", "up")
            sysctl_set(n, {"net.ipv4.conf.all.rp_filter": 0, "net.ipv4.conf.default.rp_filter": 0,
                           **family_sysctls(self.spec.addresses)})
        sysctl_set(core, {"net.ipv4.ip_forward": 1})
        if self.spec.addresses != "ipv4":
            sysctl_set(core, {"net.ipv6.conf.all.forwarding": 1})
        # links: one veth per ISP, created inside the site namespace with its peer in the core
        for lk in self.links:
            sns = self.ns(lk.site)
            ip(sns, "link", "add", lk.site_dev, "type", "veth", "peer", "name", lk.core_dev,
               "netns", core)
            for k, la in enumerate(lk.families):  # rules and routes are per family
                up_site = [["link", "set", lk.site_dev, "up"]] if k == 0 else []
                up_core = [["link", "set", lk.core_dev, "up"]] if k == 0 else []
                ip_batch(sns, up_site + site_link_commands(la, lk.site_dev, 100 + lk.index),
                         la.ip)
                ip_batch(core, up_core + core_link_commands(la, lk.core_dev, TRANSIT_TABLE),
                         la.ip)
            # shaping: up on the site's egress, down on the core's egress (asymmetric)
            shaped = ((sns, lk.site_dev, lk.up_kbps), (core, lk.core_dev, lk.down_kbps))
            for ns_, dev, rate in shaped:
                run(["tc", "-n", ns_, "qdisc", "replace", "dev", dev, "root", "tbf",
                     "rate", _kbit(rate), "burst", str(self._burst_bytes(rate)),
                     "limit", str(self._queue_bytes(lk, rate))])
        for s in sites:
            first = self.site_links(s)[0]
            for la in first.families:
                ip(self.ns(s), *la.ip, "route", "add", "default", "via", la.gateway,
                   "dev", first.site_dev)
            sysctl_set(
                self.ns(s),
                {
                    "net.mptcp.enabled": 1,
                    "net.ipv4.tcp_rmem": f"4096 131072 {BUFFER_MAX}",
                    "net.ipv4.tcp_wmem": f"4096 16384 {BUFFER_MAX}",
                    "net.ipv4.tcp_no_metrics_save": 1,
                },
            )
            for lk in self.site_links(s):
                sysctl_set(self.ns(s), {f"net.ipv4.conf.{lk.site_dev}.rp_filter": 0})
            ip(self.ns(s), "mptcp", "limits", "set", "subflows", str(MPTCP_LIMIT),
               "add_addr_accepted", str(MPTCP_LIMIT))
        for lk in self.links:
            sysctl_set(core, {f"net.ipv4.conf.{lk.core_dev}.rp_filter": 0})
        conditions.build_network(self)
        # the delay line: a persistent TUN device and the process that owns it
        ip(core, "tuntap", "add", "dev", TUN_NAME, "mode", "tun")
        ip_batch(core, [
            ["link", "set", TUN_NAME, "txqueuelen", "10000"],
            ["link", "set", TUN_NAME, "up"],
        ])
        for la in self.links[0].families:  # each family's transit table leads to the delay line
            ip(core, *la.ip, "route", "add", "default", "dev", TUN_NAME, "table", TRANSIT_TABLE)
        sysctl_set(core, {f"net.ipv4.conf.{TUN_NAME}.rp_filter": 0})
        pid = self._start_delayline()
        self._write_state({"delayline_pid": pid, "direction": None, "created": time.time()})
        self.set_direction(sites[0], sites[1])
        procs: list[dict[str, Any]] = []
        try:
            procs += conditions.start_cross(self, available_congestion_controls())
            procs += conditions.start_schedule(self)
        finally:  # recorded even when one fails, so that down ends the others
            st = self._read_state() or {}
            self._write_state({**{k: v for k, v in st.items()
                                  if k not in ("name", "digest", "spec")},
                               "field_procs": procs})

    def _delayline_config(self) -> dict[str, Any]:
        a, b = self.spec.sites
        paths = []
        for p in self.spec.resolved_paths():
            v = {"delay_ms": p.delay_ms, "loss_pct": p.loss_pct, "jitter_ms": p.jitter_ms,
                 "loss_burst": p.loss_burst}
            here, there = self._link(a.name, p.a_label), self._link(b.name, p.b_label)
            for la in here.families:  # each family its own path, with the same conditions
                src, dst = la.address, there.of_version(la.version).address
                paths.append({"src": src, "dst": dst, **v})
                paths.append({"src": dst, "dst": src, **v})
        paths += conditions.delayline_paths(self)
        return {
            "tun": TUN_NAME,
            "paths": paths,
            "netns_file": f"/run/netns/{self.core_ns}",
            "stats_file": str(self.state_dir / "delayline.stats.json"),
            "ready_file": str(self.state_dir / "delayline.ready"),
        }

    def _start_delayline(self) -> int:
        cfg_path = self.state_dir / "delayline.json"
        cfg_path.write_text(json.dumps(self._delayline_config(), indent=1))
        ready = self.state_dir / "delayline.ready"
        ready.unlink(missing_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        with open(self.state_dir / "delayline.log", "ab") as log:
            proc = subprocess.Popen(  # noqa: S603 - fixed argv, validated names
                ["ip", "netns", "exec", self.core_ns,  # noqa: S607 - iproute2 from PATH
                 sys.executable, "-m", "probes.testbed.delayline", str(cfg_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if ready.exists():
                return proc.pid
            if proc.poll() is not None:
                log_text = (self.state_dir / "delayline.log").read_text(errors="replace")
                raise TestbedError(f"delay line exited ({proc.returncode}): {log_text[-500:]}")
            time.sleep(0.02)
        kill_pid(proc.pid)
        raise TestbedError("delay line did not start within 10 s")

    def set_direction(self, sender: str, receiver: str) -> None:
        """MPTCP endpoints for a sender->receiver run: all Ns x Mr subflows with FullMesh."""
        st = self._read_state() or {}
        if st.get("direction") == [sender, receiver]:
            return
        s_ns, r_ns = self.ns(sender), self.ns(receiver)
        for n in (s_ns, r_ns):
            ip(n, "mptcp", "endpoint", "flush")
        for lk in self.site_links(sender):
            for la in lk.families:  # every family: a connection of either finds its own
                ip(s_ns, "mptcp", "endpoint", "add", la.address, "dev", lk.site_dev,
                   "id", str(endpoint_id(la.version, lk.index)), "subflow", "fullmesh")
        for lk in self.site_links(receiver)[1:]:
            for la in lk.families:
                ip(r_ns, "mptcp", "endpoint", "add", la.address, "dev", lk.site_dev,
                   "id", str(endpoint_id(la.version, lk.index)), "signal")
        self._write_state({**{k: v for k, v in st.items() if k not in ("name", "digest", "spec")},
                           "direction": [sender, receiver]})

    # ---- measuring -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """One measurement at a time per testbed (endpoints and path manager are shared)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "measure.lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def context(self, request: MeasurementRequest):
        from probes.tools.context import HostPair

        s, r = self.spec.site(request.sender), self.spec.site(request.receiver)
        return HostPair(
            sender_ns=self.ns(s.name),
            receiver_ns=self.ns(r.name),
            sender_addrs={lk.label: lk.address for lk in self.site_links(s.name)},
            receiver_addrs={lk.label: lk.address for lk in self.site_links(r.name)},
            userspace_pm=True,
            testbed=self.name,
            transit_ns=[self.core_ns],
            path_floor_ms=self.path_floors_ms(s.name),
            shared_qdiscs=conditions.shared_qdiscs(self),
        )

    def path_floors_ms(self, sender: str) -> dict[str, float]:
        """Subflow name (from `sender`) -> the least one-way delay the delay line gives its
        path: the configured delay less the jitter."""
        forward = sender == self.spec.sites[0].name
        return {(f"{p.a_label}-{p.b_label}" if forward else f"{p.b_label}-{p.a_label}"):
                max(0.0, p.delay_ms - p.jitter_ms) for p in self.spec.resolved_paths()}

    def backend(self, name: str = "iperf3", **kw: Any):
        from probes.tools.registry import make_backend

        return make_backend(name, testbed=self, **kw)

    def measure(self, request: MeasurementRequest, backend: str = "iperf3",
                **kw: Any) -> MeasurementResult:
        for site in (request.sender, request.receiver):
            try:
                self.spec.site(site)
            except KeyError:
                raise TestbedError(
                    f"request: site {site!r} is not in testbed {self.name!r}") from None
        valid = set(self.spec.subflow_names(request.sender, request.receiver))
        for sf in request.allowed_subflows or []:
            if sf not in valid:
                raise TestbedError(f"allowed_subflows: {sf!r} is not a subflow of "
                                   f"{request.sender}->{request.receiver} ({sorted(valid)})")
        what = f"probe {request.sender}->{request.receiver} on testbed {self.name}"
        with self.lock(), cc_users.using([request.cc], what), self.autotune_ceiling(
                (request.sender, request.receiver), request.autotune_max_bytes) as ceiling:
            self.set_direction(request.sender, request.receiver)
            result = self.backend(backend, **kw).measure(request)
        result.raw["testbed"] = {"name": self.name, "digest": self.spec.digest(),
                                 "rate_scale": self.spec.rate_scale}
        if ceiling:
            result.raw["autotune_ceiling"] = ceiling
        return result

    @contextlib.contextmanager
    def autotune_ceiling(self, sites: tuple[str, str],
                         max_bytes: int | None) -> Iterator[dict[str, Any]]:
        """The sites' namespaces with tcp_rmem / tcp_wmem max = `max_bytes` (min and default
        kept below it) for the block, then as they were, also on an error; what was set and
        found, per namespace. Under the testbed's lock: no other probe runs meanwhile."""
        if max_bytes is None:
            yield {}
            return
        keys = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
        found = {s: {k: sysctl_get(self.ns(s), k) for k in keys} for s in sites}
        try:
            for s in sites:
                sysctl_set(self.ns(s), {k: _with_max(found[s][k], max_bytes) for k in keys})
            yield {"max_bytes": max_bytes, "found": found}
        finally:
            for s in sites:
                sysctl_set(self.ns(s), {k: v for k, v in found[s].items() if v})

    @contextlib.contextmanager
    def tcp_memory(self, sites: tuple[str, ...],
                   values: dict[str, str]) -> Iterator[dict[str, dict[str, str | None]]]:
        """The sites' namespaces with these whole tcp_rmem / tcp_wmem triples (stock values in
        place of the testbed's 64 MiB ceilings: what a host nobody tuned has) for the block,
        then as they were, also on an error; what was found, per site. The caller holds the
        testbed (`lock`) or is its only user: a probe meanwhile would run under them."""
        unknown = sorted(set(values) - {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"})
        if unknown:
            raise TestbedError(f"tcp_memory: only tcp_rmem / tcp_wmem, not {unknown}")
        found = {s: {k: sysctl_get(self.ns(s), k) for k in values} for s in sites}
        try:
            for s in sites:
                sysctl_set(self.ns(s), dict(values))
            yield found
        finally:
            for s in sites:
                sysctl_set(self.ns(s), {k: v for k, v in found[s].items() if v})

    def delayline_stats(self) -> dict[str, Any]:
        try:
            return json.loads((self.state_dir / "delayline.stats.json").read_text())
        except (OSError, ValueError):
            return {}

    def status(self) -> dict[str, Any]:
        return testbed_status(self.name)

    def down(self) -> None:
        down(self.name)


def _with_max(triple: str | None, max_bytes: int) -> str:
    """A tcp_rmem / tcp_wmem value with its max set to `max_bytes`, min and default below it."""
    try:
        lo, default, _ = (int(x) for x in (triple or "").split())
    except ValueError:
        lo, default = 4096, 131072
    return f"{min(lo, max_bytes)} {min(default, max_bytes)} {max_bytes}"


# ---- module-level API ----------------------------------------------------------------------------
def up(spec: TestbedSpec) -> Testbed:
    return Testbed(spec).up()


def attach(name: str) -> Testbed:
    """The running testbed called ``name`` (from its state)."""
    try:
        st = json.loads((state_root() / name / "state.json").read_text())
    except (OSError, ValueError):
        raise TestbedError(f"testbed {name!r} is not up") from None
    tb = Testbed(parse_spec(st["spec"]))
    if not tb.is_up():
        raise TestbedError(f"testbed {name!r} is not (completely) up; run down and up again")
    return tb


def down(name: str) -> list[str]:
    """Remove every namespace, device and process of testbed ``name``. Returns what was removed."""
    removed: list[str] = []
    state_dir = state_root() / name
    pid = None
    procs: list[dict[str, Any]] = []
    with contextlib.suppress(OSError, ValueError):
        st = json.loads((state_dir / "state.json").read_text())
        pid, procs = st.get("delayline_pid"), st.get("field_procs") or []
    removed += conditions.stop(procs)
    if pid and pid_alive(pid) and "probes.testbed.delayline" in " ".join(pid_cmdline(pid)):
        kill_pid(pid)
        removed.append(f"process {pid} (delay line)")
    for n in testbed_namespaces(name):
        for p in netns_pids(n):  # iperf3, path manager helpers, ... started inside our namespaces
            kill_pid(p)
            removed.append(f"process {p}")
        run(["ip", "netns", "del", n], check=False)
        removed.append(f"netns {n}")
    if state_dir.exists():
        shutil.rmtree(state_dir, ignore_errors=True)
    return removed


def testbed_status(name: str) -> dict[str, Any]:
    st: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        st = json.loads((state_root() / name / "state.json").read_text())
    pid = st.get("delayline_pid")
    alive = (bool(pid) and pid_alive(pid)
             and "probes.testbed.delayline" in " ".join(pid_cmdline(pid)))
    spec = st.get("spec") or {}
    sites = spec.get("sites", [])
    nss = testbed_namespaces(name)
    procs = st.get("field_procs") or []
    field_state = conditions.status(state_root() / name, spec, procs)
    expected = 1 + len(sites) + (1 + len(_cross_isps(spec)) if _cross_isps(spec) else 0)
    return {
        "name": name,
        "namespaces": nss,
        "delayline_pid": pid,
        "delayline_alive": alive,
        "sites": {s["name"]: [i["label"] for i in s["isps"]] for s in sites},
        "direction": st.get("direction"),
        "rate_scale": spec.get("rate_scale"),
        "addresses": spec.get("addresses", "ipv4") if spec else None,
        "queues": _queues_of(spec),
        **field_state,
        "capacity_set": capacity.read(state_root() / name),
        "healthy": bool(st) and alive and len(nss) == expected and conditions.all_alive(procs),
    }


def _cross_isps(spec_data: dict[str, Any]) -> list[str]:
    return [f"{s['name']}.{i['label']}" for s in spec_data.get("sites", [])
            for i in s["isps"] if i.get("cross")]


def _queues_of(spec_data: dict[str, Any]) -> list[dict[str, Any]]:
    """The links' queues from a stored spec ([] when it cannot be read)."""
    try:
        return queue_table(parse_spec(spec_data))
    except ValueError:
        return []


def status() -> list[dict[str, Any]]:
    """Every testbed with state or namespaces on this machine (orphans included)."""
    names: set[str] = set()
    if state_root().exists():
        names |= {p.name for p in state_root().iterdir() if p.is_dir()}
    for n in list_netns():
        if n.startswith(NS_PREFIX):
            names.add(n[len(NS_PREFIX):].split("-", 1)[0])
    return [testbed_status(n) for n in sorted(names)]


def available_congestion_controls(ns: str | None = None) -> list[str]:
    """Congestion controls the kernel offers (namespaces share the host kernel's list)."""
    v = sysctl_get(ns, "net.ipv4.tcp_available_congestion_control")
    if v is None:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control", encoding="ascii") as f:
            v = f.read()
    return v.split()


def _raise_global_buffer_max() -> None:
    """SO_SNDBUF/SO_RCVBUF are capped by the (global, not per-namespace) net.core.*mem_max."""
    for key in ("net.core.wmem_max", "net.core.rmem_max"):
        cur = sysctl_get(None, key)
        if cur is not None and int(cur) < BUFFER_MAX:
            sysctl_set(None, {key: BUFFER_MAX})
