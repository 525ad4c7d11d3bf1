"""Addresses of either family, for the tools that open sockets and the netlink helpers.

A site's ISP address is IPv4 or IPv6 (``ipaddress`` decides); a socket is opened in the family
of the address it binds or connects to, and a listener that must take either family binds
``::`` with ``IPV6_V6ONLY`` off (IPv4 peers then show up as ``::ffff:a.b.c.d``, which
``probes.tools.sstats`` maps back). Imports only `probes.tools.paced_tool` (standard library
alone): every tool run as ``python -m`` may use it.
"""

from __future__ import annotations

import ipaddress
import socket

# The paced tool runs by path with the standard library alone, so it holds the one copy of
# the listener every tool shares.
from probes.tools.paced_tool import any_family_listener, ipv6_enabled

__all__ = ["any_family_listener", "connecting_socket", "family", "ipv6_enabled", "normalized",
           "parse", "unmapped", "version"]


def parse(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address (ValueError naming it when it is none); no zone, no brackets."""
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"{address!r} is not an IPv4 or IPv6 address") from None


def normalized(address: str) -> str:
    """The address as the kernel and ``ss`` print it (``2001:DB8:0::1`` -> ``2001:db8::1``)."""
    return str(parse(address))


def version(address: str) -> int:
    return parse(address).version


def family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if version(address) == 6 else socket.AF_INET


def unmapped(address: str) -> str:
    """An IPv4-mapped IPv6 address as its IPv4 address; any other unchanged."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return address


def connecting_socket(address: str, proto: int = 0) -> socket.socket:
    """A stream socket in the family of ``address`` (where it will connect)."""
    return socket.socket(family(address), socket.SOCK_STREAM, proto)
