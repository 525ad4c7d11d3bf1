"""The emulated testbed's address plan and per-family routing (``addresses: ipv4 | ipv6 | dual``).

ISP link ``i`` of site ``s`` (0-based) gets, by the scenario's ``addresses``:

- IPv4: ``10.<s+1>.<i>.1/24`` in the site, its gateway ``10.<s+1>.<i>.254`` in the core;
- IPv6: ``fd00:<s+1>:<i>::1/64`` in the site, its gateway ``fd00:<s+1>:<i>::fe`` (a unique
  local prefix, RFC 4193: it never leaves the testbed's namespaces).

``dual`` configures both on every link; the probes then run over IPv6 (``probe_version``), the
IPv4 addresses carrying the same delay, loss and rates for any other program. Every family a
link has gets its own source routing (``ip rule from ADDR lookup 100+i``), the core's rule that
sends transit traffic into the delay line, and an MPTCP endpoint of its own.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from probes.vocabulary import MAX_ISPS_PER_SITE

#: the sysctls of a namespace by its families: IPv6 stays off where the testbed has none, so no
#: router advertisement or link-local traffic reaches the probes' queues
IPV6_OFF = {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1}
IPV6_ON = {"net.ipv6.conf.all.disable_ipv6": 0, "net.ipv6.conf.default.disable_ipv6": 0,
           # a site's links are configured by hand, as the routes and rules below say
           "net.ipv6.conf.all.accept_ra": 0, "net.ipv6.conf.default.accept_ra": 0,
           # no duplicate address detection on links of two ends: a link-local address still
           # tentative held the first packets (neighbour discovery) for 1-2 s after up
           "net.ipv6.conf.all.accept_dad": 0, "net.ipv6.conf.default.accept_dad": 0}


@dataclass(frozen=True)
class LinkAddress:
    """One family's address of an ISP link: the site's end, the core's end (its gateway)."""

    version: int
    address: str
    gateway: str
    prefix: int

    @property
    def ip(self) -> list[str]:
        """``ip`` or ``ip -6``: the family's commands (rules and routes are per family)."""
        return ["-6"] if self.version == 6 else []


def versions(addresses: str) -> tuple[int, ...]:
    return {"ipv4": (4,), "ipv6": (6,), "dual": (4, 6)}[addresses]


def probe_version(addresses: str) -> int:
    """The family the probes (and the testbed's own MPTCP endpoints' first use) run over."""
    return 4 if addresses == "ipv4" else 6


def link_addresses(addresses: str, site_index: int, index: int) -> list[LinkAddress]:
    out = []
    for v in versions(addresses):
        if v == 4:
            out.append(LinkAddress(4, f"10.{site_index + 1}.{index}.1",
                                   f"10.{site_index + 1}.{index}.254", 24))
        else:
            # written as the kernel and ss print them (fd00:1::1, not fd00:1:0::1)
            net = ipaddress.IPv6Network(f"fd00:{site_index + 1}:{index}::/64")
            out.append(LinkAddress(6, str(net[1]), str(net[0xfe]), 64))
    return out


def endpoint_id(version: int, index: int) -> int:
    """An MPTCP endpoint id, unique per site across families (IPv4 first, as before)."""
    return index + 1 + (MAX_ISPS_PER_SITE if version == 6 else 0)


def family_sysctls(addresses: str) -> dict[str, int]:
    return IPV6_OFF if addresses == "ipv4" else IPV6_ON


def site_link_commands(la: LinkAddress, dev: str, table: int) -> list[list[str]]:
    """``ip`` commands (without ``ip`` and ``la.ip``, run as ``ip_batch(.., options=la.ip)``)
    for the site's end: address, source route and rule.
    ``nodad``: an address usable at once, no duplicate detection on a link of two ends."""
    dad = ["nodad"] if la.version == 6 else []
    return [
        ["addr", "add", f"{la.address}/{la.prefix}", "dev", dev, *dad],
        ["route", "add", "default", "via", la.gateway, "dev", dev, "table", str(table)],
        ["rule", "add", "from", la.address, "lookup", str(table), "pref", str(table)],
    ]


def core_link_commands(la: LinkAddress, dev: str, transit_table: str) -> list[list[str]]:
    """The core's end: the gateway address and the rule sending the link's transit traffic to
    the delay line's table."""
    dad = ["nodad"] if la.version == 6 else []
    return [
        ["addr", "add", f"{la.gateway}/{la.prefix}", "dev", dev, *dad],
        ["rule", "add", "iif", dev, "lookup", transit_table, "pref", "100"],
    ]
