"""What the topology's stated rates let a set of subflows carry at most.

A subflow runs from a sender (local) ISP's uplink to a receiver (remote) ISP's downlink, and
subflows that share an access link share its rate. So the goodput a subset of subflows can reach
is bounded by the maximum flow through the two sites' access links (source -> each local uplink
-> the subset's subflows -> each remote downlink -> sink), and adding one subflow to a subset
can add at most that subflow's own bottleneck rate, and at most what the maximum flow of the
larger subset leaves above the goodput the subset already reaches.

The subflow selection (`selection.py`) uses these bounds to leave out probes whose outcome the
rates already decide: a subflow whose rate alone is below what the best subflow alone measured
cannot start the path, and additions whose bounded gains together stay negligible are not
tried. Stated rates are an operator's word, not a measurement: `consistent` checks them against
what was measured, and the selection ignores them once a measurement exceeds its bound.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from .topology import TopologySpec

# A measured goodput may exceed a bound by this much before the stated rates are distrusted: a
# probe's mean can carry data the receiver held back before its window (MPTCP's reorder queue).
TOLERANCE = 1.10
TOLERANCE_MBPS = 0.05
_MAX_EDGE_KBPS = 100_000_000  # 100 Gbit/s: the flow's int32 arithmetic holds 16 such links
# A mean up to this far above its links' rate is capped (`capped_mean`).
RELEASE_BEYOND = 1.25
# Goodput is payload: of a full 1514-byte Ethernet frame, 1428 bytes are data once the IP and
# TCP headers with timestamps and MPTCP's DSS option are off. 8 Mbit/s carry 7.55 of goodput:
# what a 30 s probe through shared.yaml's 8 Mbit/s uplink measured (7.48 for one subflow).
PAYLOAD_SHARE = 1428 / 1514


@dataclass(frozen=True)
class LinkCapacity:
    """Per subflow its (local ISP label, remote ISP label); per local ISP its uplink and per
    remote ISP its downlink, in kbit/s."""

    ends: Mapping[str, tuple[str, str]]
    up_kbps: Mapping[str, float]
    down_kbps: Mapping[str, float]

    def __post_init__(self) -> None:
        for name, (local, remote) in self.ends.items():
            if local not in self.up_kbps or remote not in self.down_kbps:
                raise ValueError(f"{name}: its ISPs {local!r}, {remote!r} have no rate")
        for rate in (*self.up_kbps.values(), *self.down_kbps.values()):
            if not rate > 0:
                raise ValueError(f"a rate must be > 0 kbit/s, got {rate!r}")

    @classmethod
    def of(cls, spec: TopologySpec) -> LinkCapacity:
        return cls(
            ends={sf.name: (sf.local_isp.label, sf.remote_isp.label) for sf in spec.subflows()},
            up_kbps={i.label: i.up_kbps for i in spec.local.isps},
            down_kbps={i.label: i.down_kbps for i in spec.remote.isps},
        )

    def alone_mbps(self, name: str) -> float:
        """The subflow's own bottleneck: min(local uplink, remote downlink), Mbit/s."""
        local, remote = self.ends[name]
        return min(self.up_kbps[local], self.down_kbps[remote]) / 1000.0

    def max_mbps(self, subset: Iterable[str]) -> float:
        """The most the subflows of `subset` can carry together through the access links."""
        names = sorted(set(subset))
        if not names:
            return 0.0
        locals_ = sorted({self.ends[n][0] for n in names})
        remotes = sorted({self.ends[n][1] for n in names})
        # nodes: 0 source, then local ISPs, then remote ISPs, then the sink
        lid = {label: 1 + k for k, label in enumerate(locals_)}
        rid = {label: 1 + len(locals_) + k for k, label in enumerate(remotes)}
        sink = 1 + len(locals_) + len(remotes)
        edges: dict[tuple[int, int], int] = {}
        for label, node in lid.items():
            edges[(0, node)] = _kbps(self.up_kbps[label])
        for label, node in rid.items():
            edges[(node, sink)] = _kbps(self.down_kbps[label])
        for n in names:
            local, remote = self.ends[n]
            edges[(lid[local], rid[remote])] = _kbps(min(self.up_kbps[local],
                                                         self.down_kbps[remote]))
        return _max_flow_kbps(tuple(sorted((a, b, c) for (a, b), c in edges.items())),
                              sink) / 1000.0

    def gain_bound_mbps(self, subset: Iterable[str], added: str, reached_mbps: float) -> float:
        """The most adding `added` to `subset`, which reached `reached_mbps`, can add."""
        larger = {*subset, added}
        return max(0.0, min(self.alone_mbps(added), self.max_mbps(larger) - reached_mbps))

    def consistent(self, measured: Mapping[frozenset[str], float]) -> bool:
        """No measured mean (Mbit/s per subset) exceeds its subset's bound beyond the tolerance:
        the stated rates can be trusted to bound what was not measured."""
        return all(
            mean <= self.max_mbps(subset) * TOLERANCE + TOLERANCE_MBPS
            for subset, mean in measured.items()
            if subset and set(subset) <= set(self.ends)
        )


@functools.lru_cache(maxsize=4096)
def _max_flow_kbps(edges: tuple[tuple[int, int, int], ...], sink: int) -> float:
    """The maximum flow from node 0 to `sink` over `edges` (from, to, kbit/s). Cached: a
    campaign asks the same few subsets' bounds at every step, and a flow computation costs
    a millisecond of sparse-matrix set-up for a graph of a handful of nodes."""
    # here: scipy.sparse costs every CLI start a third of a second
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    rows, cols, caps = zip(*edges, strict=True)
    graph = csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)),
                       shape=(sink + 1, sink + 1))
    return float(maximum_flow(graph, 0, sink).flow_value)


def _kbps(rate: float) -> int:
    return max(1, min(_MAX_EDGE_KBPS, round(rate)))


def capped_mean(mean_mbps: float, bound_mbps: float) -> float:
    """A probe's mean goodput, capped at the goodput its links can carry (`bound_mbps`, the
    maximum flow of its subflows, x `PAYLOAD_SHARE`) when it exceeds that, by at most
    `RELEASE_BEYOND` of the links' rate.

    A mean above the links' rate is not a rate they carried in the window: the receiver released
    data it had held for the slow subflow (MPTCP's reorder queue), sent before the window began.
    Measured on `shared.yaml` (subflows of 15 and 40 ms through one 8 Mbit/s uplink, 1.68 MiB
    buffers): 5 s probes read 4.6, 5.0, 5.0, 14.1, 5.9 Mbit/s a second, every run alike, a mean
    of 8.3-9.0 after the warm-up; a 30 s probe of the same configuration read 7.55, beside 7.48
    for one subflow alone. Uncapped, such a window sets T*, and the answer's buffer follows it
    (1.68 MiB where 0.04 MiB was within delta). Far beyond the bound the stated rates are wrong,
    not the window: the mean is kept.
    """
    most = bound_mbps * PAYLOAD_SHARE
    if bound_mbps > 0 and most < mean_mbps <= bound_mbps * RELEASE_BEYOND:
        return most
    return mean_mbps
