"""A free port triple P-1, P, P+1 on both ends of a probe, inside `MPCOA_PROBE_PORTS`.

NetPerfMeter 2.x listens on P (TCP/UDP/SCTP/DCCP data), P-1 (MPTCP and QUIC data) and P+1
(control); iperf3 needs P only. One rule for both: all three free (no socket of any state bound
to them, TCP, MPTCP or UDP) in every namespace involved, P drawn at random so concurrent probes
rarely even try the same one. Every port a probe, a passive side or an apply's confirmation
listens on is such a triple, so the setting (`LOW-HIGH`, every port of the triples; default
20000-31999, below the kernel's ephemeral range) is the one a site's firewall opens.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from probes import environment
from probes.base import ProbeError
from probes.netns import in_ns, run_many, run_ns
from probes.tools.sstats import split_addr

#: every port a probe may use; ephemeral ports start at 32768 (ip_local_port_range)
DEFAULT_PROBE_PORTS = "20000-31999"
#: the fewest ports a range may have: room for a few triples at once on one host (a site's
#: long-lived NetPerfMeter node, its spare, the probe running, an apply's confirmation), so a
#: probe does not fail for want of a port while its neighbours run
MIN_PROBE_PORTS = 16
#: below it the well-known and registered system ports (ssh, the API, PostgreSQL's neighbours)
LOWEST_PROBE_PORT = 1024
_RANGE = re.compile(r"\s*(\d{1,5})\s*-\s*(\d{1,5})\s*")


def parse_port_range(text: str) -> tuple[int, int]:
    """`LOW-HIGH` (inclusive) as (LOW, HIGH); a ValueError of one line for anything else."""
    match = _RANGE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{str(text)[:40]!r} is not a port range LOW-HIGH (e.g. "
                         f"{DEFAULT_PROBE_PORTS})")
    low, high = int(match[1]), int(match[2])
    if not LOWEST_PROBE_PORT <= low <= high <= 65535:
        raise ValueError(f"port range {low}-{high}: want {LOWEST_PROBE_PORT} <= LOW <= HIGH "
                         "<= 65535")
    if high - low + 1 < MIN_PROBE_PORTS:
        raise ValueError(f"port range {low}-{high}: {high - low + 1} ports, fewer than the "
                         f"{MIN_PROBE_PORTS} a host's probes need (triples P-1, P, P+1)")
    return low, high


def probe_port_range() -> tuple[int, int]:
    """`MPCOA_PROBE_PORTS` now (service/settings.py reads it), as (LOW, HIGH)."""
    value = environment.get("probe_ports", DEFAULT_PROBE_PORTS)
    return value if isinstance(value, tuple) else parse_port_range(value)


def centre_bounds(ports: tuple[int, int]) -> tuple[int, int]:
    """The bounds of P for a range of every port used: its triple stays inside."""
    return ports[0] + 1, ports[1] - 1


PORT_LOW, PORT_HIGH = centre_bounds(parse_port_range(DEFAULT_PROBE_PORTS))


SS_ARGS = (["-tuanH"], ["-ManH"])


def used_ports(ns: str | None, ss: str = "ss") -> set[int]:
    """Local ports of every TCP, UDP and MPTCP socket in ``ns`` (listening or not)."""
    return ports_in([run_ns(ns, [ss, *args], check=False).stdout for args in SS_ARGS])


def ports_in(texts: Iterable[str]) -> set[int]:
    """The local ports in outputs of ``ss`` (`SS_ARGS`)."""
    used: set[int] = set()
    for out in texts:
        for line in out.splitlines():
            fields = line.split()
            addrs = [f for f in fields if ":" in f and f.rsplit(":", 1)[1].isdigit()]
            if addrs:
                used.add(split_addr(addrs[0])[1])
    return used


def pick_triple(used: set[int], rng: random.Random, low: int = PORT_LOW,
                high: int = PORT_HIGH, tries: int = 200) -> int:
    """P in low..high with P-1, P, P+1 all outside ``used``."""
    if not 2 <= low <= high <= 65534:
        raise ProbeError(f"port range {low}..{high}: not within 2..65534")
    for _ in range(tries):
        p = rng.randint(low, high)
        if not {p - 1, p, p + 1} & used:
            return p
    raise ProbeError(f"no free port triple in {low - 1}..{high + 1} after {tries} tries")


def choose_port_triple(namespaces: Iterable[str | None], rng: random.Random | None = None) -> int:
    low, high = centre_bounds(probe_port_range())  # a bad setting fails before anything runs
    # every namespace's tables read at once (`netns.run_many`)
    done = run_many([in_ns(ns, ["ss", *args]) for ns in namespaces for args in SS_ARGS])
    used = ports_in(cp.stdout for cp in done)
    return pick_triple(used, rng or random.Random(), low, high)  # noqa: S311 - not for security
