"""The kernel's MPTCP counters (``MPTcpExt`` in ``/proc/net/netstat``, one set per network
namespace): read, differenced across a probe, and turned into why a connection fell back.

The names are the kernel's own (include/net/mptcp/mib.c); which exist depends on the kernel, so
a name this kernel lacks is simply absent from what is read, never reported as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from probes.netns import in_ns, run_many

#: what the health report and every probe keep: fallbacks, dropped or disabled MP_CAPABLE
#: SYNs, the blackhole detector, stale and recovered subflows
HEALTH_COUNTERS = (
    "MPCapableSYNTX", "MPCapableSYNACKRX",
    "MPCapableFallbackACK", "MPCapableFallbackSYNACK", "MPCapableSYNTXDrop",
    "MPCapableSYNTXDisabled", "MPCapableDataFallback", "MPFallbackTokenInit",
    "DSSCorruptionFallback", "MD5SigFallback", "DssFallback", "SimultConnectFallback",
    "FallbackFailed", "Blackhole", "SubflowStale", "SubflowRecover",
)

#: counter -> what a rise of it says about a connection that fell back to TCP
FALLBACK_CAUSES = {
    "MPCapableSYNTXDisabled": "MPTCP disabled by the kernel's blackhole lockout "
                              "(net.mptcp.blackhole_timeout): the SYN went out as plain TCP",
    "MPCapableSYNTXDrop": "SYNs carrying MP_CAPABLE were dropped on the path (a middlebox); "
                          "the kernel retried without it",
    "Blackhole": "the kernel detected an MPTCP blackhole and started a lockout",
    "MPCapableFallbackSYNACK": "the peer's SYN-ACK carried no MP_CAPABLE (the option stripped "
                               "on the path, or the peer does not speak MPTCP)",
    "MPCapableFallbackACK": "the third ACK carried no MP_CAPABLE (stripped on the path)",
    "MPCapableDataFallback": "the first data carried no MPTCP mapping (stripped on the path)",
    "MPFallbackTokenInit": "the kernel could not create the connection's MPTCP token",
    "DSSCorruptionFallback": "a DSS mapping was corrupted on the path",
    "DssFallback": "a DSS option was missing or bad on the path",
    "MD5SigFallback": "a TCP-MD5 signature leaves no option space for MPTCP",
    "SimultConnectFallback": "a simultaneous connect cannot be MPTCP",
}

NETSTAT = "/proc/net/netstat"


def parse_netstat(text: str) -> dict[str, int]:
    """The ``MPTcpExt`` counters of a ``/proc/net/netstat`` text (a header line of names, then
    a line of values); {} when the kernel has none. ValueError on a malformed pair of lines."""
    lines = [ln.split() for ln in text.splitlines() if ln.startswith("MPTcpExt:")]
    if not lines:
        return {}
    if len(lines) != 2 or len(lines[0]) != len(lines[1]):
        raise ValueError(f"{NETSTAT}: MPTcpExt lines malformed ({len(lines)} lines)")
    names, values = lines[0][1:], lines[1][1:]
    try:
        return {n: int(v) for n, v in zip(names, values, strict=True)}
    except ValueError:
        raise ValueError(f"{NETSTAT}: MPTcpExt value not an integer") from None


def read_counters(namespaces: Sequence[str | None]) -> list[dict[str, int]]:
    """Every MPTCP counter of each namespace (None: this process's own), read at once; a
    namespace that cannot be read gives {} (a probe never fails for its bookkeeping)."""
    out: list[dict[str, int] | None] = [None] * len(namespaces)
    remote = [(i, ns) for i, ns in enumerate(namespaces) if ns is not None]
    done = run_many([in_ns(ns, ["cat", NETSTAT]) for _, ns in remote]) if remote else []
    for (i, _), cp in zip(remote, done, strict=True):
        out[i] = _parsed(cp.stdout) if cp.returncode == 0 else {}
    for i, ns in enumerate(namespaces):
        if ns is None:
            try:
                with open(NETSTAT) as f:
                    out[i] = _parsed(f.read())
            except OSError:
                out[i] = {}
    return [o or {} for o in out]


def _parsed(text: str) -> dict[str, int]:
    try:
        return parse_netstat(text)
    except ValueError:
        return {}


def health_counters(counters: Mapping[str, int]) -> dict[str, int]:
    """The health counters this kernel has, in `HEALTH_COUNTERS` order."""
    return {n: counters[n] for n in HEALTH_COUNTERS if n in counters}


def delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """How much each health counter rose between two reads (only counters both reads have;
    a counter that went down, a namespace made anew, counts from 0)."""
    out = {}
    for name in HEALTH_COUNTERS:
        if name in before and name in after:
            rise = after[name] - before[name]
            out[name] = after[name] if rise < 0 else rise
    return out


def fallback_causes(rises: Mapping[str, int]) -> list[str]:
    """What the counters' rises say about a fallback, most telling first (a lockout before a
    drop before a stripped option); [] when none rose."""
    return [f"{why} ({name} +{rises[name]})" for name, why in FALLBACK_CAUSES.items()
            if rises.get(name, 0) > 0]
