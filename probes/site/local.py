"""A real site's worker describes itself: its ISP labels mapped to addresses configured on this
host, and what the host offers (kernel, MPTCP, path managers, CCs, tools).

``mpcoa worker --site NAME --isp LABEL=ADDR|@IFNAME`` parses and checks its options here and
stores the report (``capability_report``) for the API's ``GET /sites/{id}/capabilities``.
"""

from __future__ import annotations

import ipaddress
import json
import platform
import re
from dataclasses import dataclass
from typing import Any

from probes.netns import run_ns, sysctl_get
from probes.site.mptcp_health import mptcp_health
from probes.tools import choice as probe_tools
from probes.vocabulary import LABEL_PATTERN, NAME_PATTERN, address_problem

IFNAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")  # Linux: at most 15 bytes (IFNAMSIZ - 1)


@dataclass(frozen=True)
class LocalSite:
    name: str
    isps: dict[str, str]  # ISP label -> local IP address, in the order given


def parse_isp_option(value: str) -> tuple[str, str]:
    """A worker's ``--isp``, the ISP syntax of ``mpcoa site add`` without its rates
    (docs/cli.md): ``"L@10.0.0.1"`` -> ("L", "10.0.0.1"); ``"L@eth1"`` -> ("L", "@eth1"), an
    interface being anything that is not an address. The older ``L=10.0.0.1`` and ``L=@eth1``
    still read. Only the form and the label's pattern are checked here; whether the address is
    this host's is not."""
    if "=" in value.split("@", 1)[0]:  # the older spelling: LABEL=ADDRESS or LABEL=@INTERFACE
        label, _, target = value.partition("=")
    else:
        label, sep, where = value.partition("@")
        if ":" in label:
            raise ValueError(f"--isp {value!r}: a worker takes no rates (they are the site's, "
                             "given to `mpcoa site add`): give LABEL@ADDRESS or LABEL@INTERFACE")
        if not sep:
            raise ValueError(f"--isp {value!r}: expected LABEL@ADDRESS or LABEL@INTERFACE")
        target = where if _is_address(where) else "@" + where
    if not label or not target or target == "@":
        raise ValueError(f"--isp {value!r}: expected LABEL@ADDRESS or LABEL@INTERFACE")
    if not re.fullmatch(LABEL_PATTERN, label):
        raise ValueError(f"--isp {value!r}: label {label!r} is not an ISP label "
                         "(a letter, then up to 7 letters or digits)")
    if target.startswith("@"):
        if not IFNAME.fullmatch(target[1:]):
            raise ValueError(f"--isp {value!r}: {target[1:]!r} is not an interface name")
        return label, target
    try:
        addr = ipaddress.ip_address(target)
    except ValueError:
        raise ValueError(f"--isp {value!r}: {target!r} is neither an IPv4 or IPv6 address nor "
                         "an interface") from None
    why = address_problem(addr)
    if why:
        raise ValueError(f"--isp {value!r}: {why}")
    return label, str(addr)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return ":" in text or "/" in text  # meant as an address (IPv6, a prefix): said so
    return True


def host_addresses(ns: str | None = None) -> dict[str, list[str]]:
    """Interface -> its addresses (IPv4 first, in the kernel's order), from ``ip -j addr``."""
    cp = run_ns(ns, ["ip", "-j", "addr", "show"], check=False)
    if cp.returncode != 0:
        raise ValueError(f"ip -j addr: {cp.stderr.strip() or 'failed'}")
    out: dict[str, list[str]] = {}
    for link in json.loads(cp.stdout or "[]"):
        infos = link.get("addr_info") or []
        v4 = [a["local"] for a in infos if a.get("family") == "inet" and a.get("local")]
        v6 = [a["local"] for a in infos if a.get("family") == "inet6" and a.get("local")]
        out[link.get("ifname", "")] = v4 + v6
    return out


def resolve_local_site(name: str, isp_options: list[str], ns: str | None = None) -> LocalSite:
    """The site and its ISPs' local addresses; ValueError naming every problem found."""
    problems = []
    if not re.fullmatch(NAME_PATTERN, name):
        problems.append(f"--site {name!r}: not a site name (a letter, then up to 31 letters, "
                        "digits or _)")
    parsed: list[tuple[str, str]] = []
    for opt in isp_options:
        try:
            parsed.append(parse_isp_option(opt))
        except ValueError as exc:
            problems.append(str(exc))
    addrs = host_addresses(ns) if parsed else {}
    configured = {a for lst in addrs.values() for a in lst}
    isps: dict[str, str] = {}
    for label, target in parsed:
        if label in isps:
            problems.append(f"--isp {label}: given twice")
            continue
        if target.startswith("@"):
            ifname = target[1:]
            if ifname not in addrs:
                problems.append(f"--isp {label}{target}: no interface {ifname!r} on this host "
                                f"(have: {', '.join(sorted(addrs)[:20])})")
                continue
            # IPv4 first, else the first IPv6 address another site can reach
            usable = [a for a in addrs[ifname] if not address_problem(ipaddress.ip_address(a))]
            if not usable:
                problems.append(f"--isp {label}{target}: interface {ifname!r} has no IPv4 "
                                "address and no global or unique local IPv6 one")
                continue
            address = usable[0]
        else:
            address = target
            if address not in configured:
                problems.append(f"--isp {label}@{address}: address not configured on this host")
                continue
        if address in isps.values():
            problems.append(f"--isp {label}: address {address} already used by another label")
            continue
        isps[label] = address
    families = {ipaddress.ip_address(a).version for a in isps.values()}
    if len(families) > 1:  # a subflow joins two addresses of one family
        by = ", ".join(f"{lbl}=IPv{ipaddress.ip_address(a).version}" for lbl, a in isps.items())
        problems.append(f"--isp: addresses of both families ({by}): a site's probes run over one "
                        "family; give every ISP's IPv4 address, or every ISP's IPv6 address")
    if problems:
        raise ValueError("; ".join(problems))
    return LocalSite(name=name, isps=isps)


def _family(site: LocalSite | None) -> str | None:
    versions = {ipaddress.ip_address(a).version for a in (site.isps.values() if site else ())}
    return f"ipv{versions.pop()}" if len(versions) == 1 else None


def capability_report(site: LocalSite | None, ns: str | None = None,
                      netperfmeter: str = "netperfmeter") -> dict[str, Any]:
    """What this host offers a site's probes; ``problems`` lists what stops it from probing."""
    enabled = sysctl_get(ns, "net.mptcp.enabled")
    pm_type = sysctl_get(ns, "net.mptcp.pm_type")  # 0 in-kernel, 1 userspace (Linux >= 6.2)
    ccs = (sysctl_get(ns, "net.ipv4.tcp_available_congestion_control") or "").split()
    pms = []
    if enabled is not None:
        pms.append("in-kernel")
        if pm_type is not None:
            pms.append("userspace")
    found = probe_tools.inventory(netperfmeter=netperfmeter)
    tools = found["tools"]
    problems = []
    if enabled is None:
        problems.append("kernel MPTCP: not available (no net.mptcp sysctls)")
    elif enabled != "1":
        problems.append("kernel MPTCP: disabled; set net.mptcp.enabled=1")
    if not ccs:
        problems.append("no congestion control offered (net.ipv4.tcp_available_congestion_"
                        "control)")
    health = mptcp_health(ns)
    problems += [p for p in health["problems"] if enabled == "1"]
    if probe_tools.BULK not in probe_tools.measures(tools):
        problems.append("no probe tool that runs here: "
                        + probe_tools.install_hint(probe_tools.BULK)
                        + "".join(f"; {n}" for n in found["notes"]))
    return {
        "site": site.name if site else None,
        "kernel": platform.release(),
        "mptcp_enabled": enabled == "1",
        "path_managers": pms,
        "pm_type": None if pm_type is None else ("userspace" if pm_type == "1" else "in-kernel"),
        # what MPTCP can do here now: counters, the blackhole lockout, the settings relied on
        "mptcp_health": health,
        "congestion_controls": ccs,
        "tools": tools,
        "allows": found["allows"],
        "tool_notes": found["notes"],
        "netperfmeter_path": netperfmeter,
        "endpoints": dict(site.isps) if site else {},
        # the family the site's probes and applied endpoints use (one for all its ISPs)
        "address_family": _family(site),
        "problems": problems,
    }
