"""Addresses of either family, for the tools that open sockets and the netlink helpers.

A site's ISP address is IPv4 or IPv6 (``ipaddress`` decides); a socket is opened in the family
of the address it binds or connects to, and a listener that must take either family binds
``::`` with ``IPV6_V6ONLY`` off (IPv4 peers then show up as ``::ffff:a.b.c.d``, which
``probes.sstats`` maps back). Imports nothing of ours: every tool run as ``python -m`` may use it.
"""

from __future__ import annotations

import ipaddress
import socket


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


def ipv6_enabled() -> bool:
    """Whether this process's network namespace has IPv6 (/proc/sys/net is per namespace)."""
    try:
        with open("/proc/sys/net/ipv6/conf/all/disable_ipv6", encoding="ascii") as f:
            return f.read().strip() == "0"
    except OSError:
        return False


def any_family_listener(port: int, proto: int = 0, *, before_bind=None) -> socket.socket:
    """A socket bound to ``port`` on every local address of both families (``::`` with
    IPV6_V6ONLY off); ``0.0.0.0`` where the namespace has no IPv6. `before_bind(sock)` sets
    options that must come before bind and listen (buffers)."""
    for fam, wildcard in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):  # noqa: S104
        if fam == socket.AF_INET6 and not ipv6_enabled():
            continue  # an IPv4-only namespace keeps a plain IPv4 listener, as it always had
        try:
            s = socket.socket(fam, socket.SOCK_STREAM, proto)
        except OSError:
            continue
        try:
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if before_bind is not None:
                before_bind(s)
            s.bind((wildcard, port))
            return s
        except OSError:
            s.close()
            if fam == socket.AF_INET:
                raise
    raise OSError(f"no socket could listen on port {port}")


def connecting_socket(address: str, proto: int = 0) -> socket.socket:
    """A stream socket in the family of ``address`` (where it will connect)."""
    return socket.socket(family(address), socket.SOCK_STREAM, proto)
