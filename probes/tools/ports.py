"""A free port triple P-1, P, P+1 on both ends of a probe.

NetPerfMeter 2.x listens on P (TCP/UDP/SCTP/DCCP data), P-1 (MPTCP and QUIC data) and P+1
(control); iperf3 needs P only. One rule for both: all three free (no socket of any state bound
to them, TCP, MPTCP or UDP) in every namespace involved, P drawn at random from a high range
below the kernel's ephemeral range so concurrent probes rarely even try the same one.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from probes.base import ProbeError
from probes.netns import in_ns, run_many, run_ns
from probes.tools.sstats import split_addr

PORT_LOW, PORT_HIGH = 20001, 31998  # ephemeral ports start at 32768 (ip_local_port_range)


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
    """P with P-1, P, P+1 all outside ``used``."""
    if not 2 <= low <= high <= 65534:
        raise ProbeError(f"port range {low}..{high}: not within 2..65534")
    for _ in range(tries):
        p = rng.randint(low, high)
        if not {p - 1, p, p + 1} & used:
            return p
    raise ProbeError(f"no free port triple in {low - 1}..{high + 1} after {tries} tries")


def choose_port_triple(namespaces: Iterable[str | None], rng: random.Random | None = None) -> int:
    # every namespace's tables read at once (`netns.run_many`)
    done = run_many([in_ns(ns, ["ss", *args]) for ns in namespaces for args in SS_ARGS])
    used = ports_in(cp.stdout for cp in done)
    return pick_triple(used, rng or random.Random())  # noqa: S311 - not for security
