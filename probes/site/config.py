"""A site's MPTCP and TCP settings, read and written: the in-kernel path manager's endpoints and
limits, the sysctls an answer sets, in a network namespace or on the host itself.

Every value is checked here before it reaches a command (`check_target`); every command is an
argument list (`ip -n NS mptcp ...`, `ip netns exec NS sysctl -w KEY=VALUE`).
"""

from __future__ import annotations

import ipaddress
import json
import platform
import re
from typing import Any

from probes.base import ProbeError
from probes.netns import ip, run_ns, sysctl_get_many
from probes.site.local import IFNAME, host_addresses
from probes.vocabulary import CC_PATTERN

FLAGS = ("signal", "subflow", "backup", "fullmesh")
LIMIT_KEYS = ("subflows", "add_addr_accepted")
LIMIT_MAX = 8
# The sysctls an apply may write inside a namespace, with the form of their values.
NETNS_SYSCTLS: dict[str, str] = {
    "net.mptcp.enabled": r"^[01]$",
    "net.mptcp.path_manager": r"^(kernel|userspace)$",
    "net.mptcp.pm_type": r"^[01]$",
    "net.ipv4.tcp_congestion_control": CC_PATTERN,
    "net.ipv4.tcp_rmem": r"^\d{1,10} \d{1,10} \d{1,10}$",
    "net.ipv4.tcp_wmem": r"^\d{1,10} \d{1,10} \d{1,10}$",
}
HOST_SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max")
# A namespace may default only to a congestion control in this host-wide list (the kernel
# answers EPERM otherwise, even to root: "only init netns can set default to a restricted
# algorithm").
ALLOWED_CCS = "net.ipv4.tcp_allowed_congestion_control"
AVAILABLE_CCS = "net.ipv4.tcp_available_congestion_control"
READ_SYSCTLS = (*NETNS_SYSCTLS, *HOST_SYSCTLS, ALLOWED_CCS)


class SiteConfigError(ProbeError):
    """A target that is not valid, or a setting the site refused."""


def _base(ns: str | None) -> list[str]:
    return ["ip"] if ns is None else ["ip", "-n", ns]


# The kernel's flag of an endpoint it made itself for an address a subflow used that no endpoint
# names (MPTCP_PM_ADDR_FLAG_IMPLICIT): iproute2 6.1 does not know its name and shows it as
# `rawflags 10` (JSON "rawflags": "10", hex); newer ones as `implicit`.
IMPLICIT_FLAG = 0x10


def _is_implicit(e: dict[str, Any]) -> bool:
    if e.get("implicit"):
        return True
    try:
        return bool(int(str(e.get("rawflags", "0")), 16) & IMPLICIT_FLAG)
    except ValueError:
        return False


def _endpoint_table(ns: str | None) -> list[dict[str, Any]]:
    cp = run_ns(None, [*_base(ns), "-j", "mptcp", "endpoint", "show"], check=False)
    if cp.returncode != 0:
        raise SiteConfigError(f"ip mptcp endpoint show: {cp.stderr.strip() or 'failed'}")
    return json.loads(cp.stdout or "[]")


def read_endpoints(ns: str | None) -> list[dict[str, Any]]:
    """The configured endpoints: what an apply sets and a rollback restores. The kernel's
    implicit ones (`read_implicit`) are not configuration: no one can create one."""
    out = []
    for e in _endpoint_table(ns):
        if _is_implicit(e):
            continue
        out.append({"id": int(e["id"]), "address": e["address"],
                    **({"dev": e["dev"]} if e.get("dev") else {}),
                    **{f: True for f in FLAGS if e.get(f)}})
    return sorted(out, key=lambda e: e["id"])


def read_implicit(ns: str | None) -> list[dict[str, Any]]:
    """The endpoints the kernel made implicitly (for a peer's or a probe's subflow), as
    {"id", "address", "implicit": True}."""
    return sorted(({"id": int(e["id"]), "address": e["address"], "implicit": True}
                   for e in _endpoint_table(ns) if _is_implicit(e)), key=lambda e: e["id"])


def read_limits(ns: str | None) -> dict[str, int]:
    text = ip(ns, "mptcp", "limits", "show").stdout  # iproute2 6.1 has no JSON for limits
    found = dict(re.findall(r"(subflows|add_addr_accepted)\s+(\d+)", text))
    return {k: int(v) for k, v in found.items()}


def read_state_for_plan(ns: str | None) -> dict[str, Any]:
    """`read_state` and the implicit endpoints, whose ids a plan leaves to them (the plan's
    input only: a journal's or a check's state stays `read_state`, which the kernel's own
    endpoints, made and dropped as peers connect, would not keep equal)."""
    return {**read_state(ns), "implicit_endpoints": read_implicit(ns)}


def read_state(ns: str | None) -> dict[str, Any]:
    """Everything an apply may change on this site, as it is now."""
    got = sysctl_get_many(ns, [*READ_SYSCTLS, AVAILABLE_CCS])  # one process, not one a key
    sysctls = {key: " ".join(got[key].split()) for key in READ_SYSCTLS if got[key] is not None}
    return {
        "namespace": ns,
        "kernel": platform.release(),
        "endpoints": read_endpoints(ns),
        "limits": read_limits(ns),
        "sysctls": sysctls,
        "available_ccs": (got[AVAILABLE_CCS] or "").split(),
    }


# ---- validation ---------------------------------------------------------------------------------
def check_endpoint(ep: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(ep, dict):
        raise SiteConfigError(f"endpoint {ep!r}: not an object")
    eid = ep.get("id")
    if not isinstance(eid, int) or isinstance(eid, bool) or not 1 <= eid <= 255:
        raise SiteConfigError(f"endpoint id {eid!r}: an integer 1..255")
    try:
        addr = str(ipaddress.ip_address(ep.get("address", "")))
    except ValueError:
        raise SiteConfigError(f"endpoint {eid}: {ep.get('address')!r} is not an IP address") \
            from None
    unknown = [k for k in ep if k not in ("id", "address", "dev", *FLAGS)]
    if unknown:
        raise SiteConfigError(f"endpoint {eid}: unknown field(s) {unknown}")
    dev = ep.get("dev")
    if dev is not None and (not isinstance(dev, str) or not IFNAME.fullmatch(dev)):
        raise SiteConfigError(f"endpoint {eid}: {dev!r} is not an interface name")
    flags = {f: True for f in FLAGS if ep.get(f) is True}
    return {"id": eid, "address": addr, **({"dev": dev} if dev else {}), **flags}


def check_target(target: dict[str, Any]) -> dict[str, Any]:
    """A site's target (`service.flows.applying.site_plan.desired_state`'s form), validated."""
    if not isinstance(target, dict):
        raise SiteConfigError("target: not an object")
    eps = [check_endpoint(e) for e in target.get("endpoints", [])]
    ids = [e["id"] for e in eps]
    addrs = [e["address"] for e in eps]
    if len(set(ids)) != len(ids) or len(set(addrs)) != len(addrs):
        raise SiteConfigError("endpoints: ids and addresses must be unique")
    limits = {}
    for k, v in (target.get("limits") or {}).items():
        if k not in LIMIT_KEYS or not isinstance(v, int) or not 0 <= v <= LIMIT_MAX:
            raise SiteConfigError(f"limit {k}={v!r}: one of {LIMIT_KEYS}, 0..{LIMIT_MAX}")
        limits[k] = v
    sysctls = {}
    for k, v in (target.get("sysctls") or {}).items():
        pattern = NETNS_SYSCTLS.get(k)
        if pattern is None:
            raise SiteConfigError(f"sysctl {k!r}: not one an apply writes "
                                  f"({', '.join(NETNS_SYSCTLS)})")
        if not isinstance(v, str) or not re.fullmatch(pattern, v):
            raise SiteConfigError(f"sysctl {k}={v!r}: not of the form {pattern}")
        sysctls[k] = v
    host = {}
    for k, v in (target.get("host_minimums") or {}).items():
        if k not in HOST_SYSCTLS or not isinstance(v, int) or not 0 < v < 2**31:
            raise SiteConfigError(f"host minimum {k}={v!r}: one of {HOST_SYSCTLS}, 1..2^31-1")
        host[k] = v
    bpf_cc = target.get("bpf_cc")
    if bpf_cc is not None and (not isinstance(bpf_cc, str) or not re.fullmatch(CC_PATTERN,
                                                                              bpf_cc)):
        raise SiteConfigError(f"bpf_cc {bpf_cc!r}: not a congestion-control name")
    return {"endpoints": eps, "limits": limits, "sysctls": sysctls, "host_minimums": host,
            "bpf_cc": bpf_cc}


# ---- writing ------------------------------------------------------------------------------------
def _same_endpoint(have: dict[str, Any], want: dict[str, Any]) -> bool:
    """`have` is as `want` says (a device only when `want` names one)."""
    return (have["id"], have["address"]) == (want["id"], want["address"]) and all(
        bool(have.get(f)) == bool(want.get(f)) for f in FLAGS) and (
        "dev" not in want or have.get("dev") == want["dev"])


def _unmapped(address: str) -> str:
    """An IPv4 address the way the kernel compares it: a dual-stack socket's subflow leaves an
    implicit endpoint at the IPv4-mapped form (::ffff:10.0.0.1), the same address as 10.0.0.1."""
    ip_ = ipaddress.ip_address(address)
    mapped = getattr(ip_, "ipv4_mapped", None)
    return str(mapped or ip_)


def _device_of(ns: str | None, address: str) -> str | None:
    for dev, addrs in host_addresses(ns).items():
        if address in addrs:
            return dev
    return None


def set_endpoints(ns: str | None, wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converge the configured endpoints to exactly `wanted` (idempotent: run twice, same
    table). The kernel's implicit endpoints are left alone, but for one holding the address or
    the id of an endpoint to add: the kernel refuses an endpoint with an id beside it (EINVAL,
    EBUSY), so it is removed first and the configured one takes its place. Returns the
    implicit endpoints so replaced; none is ever created (the kernel makes them)."""
    current = read_endpoints(ns)
    for ep in current:
        if not any(_same_endpoint(ep, w) for w in wanted):
            ip(ns, "mptcp", "endpoint", "delete", "id", str(ep["id"]))
    have = read_endpoints(ns)
    missing = [w for w in wanted if not any(_same_endpoint(h, w) for h in have)]
    replaced = [imp for imp in (read_implicit(ns) if missing else [])
                if any(_unmapped(imp["address"]) == _unmapped(w["address"])
                       or imp["id"] == w["id"] for w in missing)]
    for imp in replaced:
        ip(ns, "mptcp", "endpoint", "delete", "id", str(imp["id"]))
    for w in missing:
        argv = ["mptcp", "endpoint", "add", w["address"]]
        dev = w.get("dev") or (_device_of(ns, w["address"]) if w.get("subflow") else None)
        if dev:
            argv += ["dev", dev]
        argv += ["id", str(w["id"]), *[f for f in FLAGS if w.get(f)]]
        try:
            ip(ns, *argv)
        except ProbeError as exc:  # the table as the kernel has it says why
            raise SiteConfigError(f"{exc} (endpoints now: {_endpoint_table(ns)}; implicit "
                                  f"ones removed first: {replaced})") from None
    return replaced


def readd_endpoint(ns: str | None, endpoint: dict[str, Any], backup: bool) -> None:
    """Replace one endpoint by itself with the backup flag set or cleared: its subflows close
    and the in-kernel PM opens new ones, with the new flag, on every live connection.

    Not `ip mptcp endpoint change id N nobackup`: on this kernel its MP_PRIO reaches only the
    first subflow of the address (seen: K-C kept its backup flag in `ss -Mti` while K-D was
    promoted, and the transfer ran on K-D alone), and iproute2 6.1 clears `fullmesh` unless it
    is repeated."""
    ep = check_endpoint({**endpoint, "backup": backup})
    ip(ns, "mptcp", "endpoint", "delete", "id", str(ep["id"]))
    argv = ["mptcp", "endpoint", "add", ep["address"]]
    if ep.get("dev"):
        argv += ["dev", ep["dev"]]
    ip(ns, *argv, "id", str(ep["id"]), *[f for f in FLAGS if ep.get(f)])


def set_limits(ns: str | None, limits: dict[str, int]) -> None:
    args: list[str] = []
    for k in LIMIT_KEYS:
        if k in limits:
            args += [k, str(int(limits[k]))]
    if args:
        ip(ns, "mptcp", "limits", "set", *args)


def set_sysctl(ns: str | None, key: str, value: str) -> None:
    if key not in NETNS_SYSCTLS and key not in HOST_SYSCTLS and key != ALLOWED_CCS:
        raise SiteConfigError(f"sysctl {key!r}: not one an apply writes")
    cp = run_ns(ns, ["sysctl", "-q", "-w", f"{key}={value}"], check=False)
    # procps' sysctl exits 0 when the kernel refuses a write (EINVAL, a read-only key in a
    # namespace): only reading the value back tells
    now = sysctl_get_many(ns, [key])[key]
    if cp.returncode != 0 or now is None or now.split() != value.split():
        raise SiteConfigError(f"sysctl {key}={value}: {cp.stderr.strip() or 'refused'}"
                              + (f" (it reads {' '.join(now.split())})" if now else ""))
