"""Eq. 1, the traditional buffer, over the subflows an answer uses: measured RTT/RTO where a
campaign stored them, else the RTTs configured on the topology, else it says why it is unknown."""

from __future__ import annotations

from ...algorithm.traditional import rto_from_rtt, traditional_buffer
from ...store import measurements
from .answer import Eq1
from .snapshot import TopologySnapshot


def traditional_eq1(
    topology: TopologySnapshot,
    used: list[str],
    summary: measurements.MeasurementSummary | None,
    obs_mib: float | None,
) -> Eq1:
    """Eq. 1 over the used subflows, or why it is unknown. Measured RTT/RTO win over configured."""
    rtts, rtos, bws, sources, missing = [], [], [], set(), []
    for name in used:
        bandwidth_kbps, configured_rtt_ms = topology.subflows[name]
        measured = summary.rtt_ms.get(name) if summary else None
        rtt_ms = measured if measured is not None else configured_rtt_ms
        if rtt_ms is None:
            missing.append(name)
            continue
        sources.add("measurements" if measured is not None else "topology")
        rto_measured = summary.rto_ms.get(name) if summary else None
        rtts.append(rtt_ms / 1000.0)
        rtos.append(rto_measured / 1000.0 if rto_measured else rto_from_rtt(rtt_ms / 1000.0))
        bws.append(bandwidth_kbps)
    if missing:
        return Eq1(
            available=False,
            subflows=used,
            reason=(
                f"RTT unknown for subflows {missing}: no measurement recorded one and the "
                "topology has none configured (set rtts_ms on the topology)"
            ),
            missing_rtt_subflows=missing,
        )
    tb = traditional_buffer(rtts, rtos, bws)
    return Eq1(
        available=True,
        subflows=used,
        buffer_mib=tb.buffer_mib,
        fallback_mib=tb.fallback_mib,
        obs_ratio=tb.ratio(obs_mib) if obs_mib is not None and tb.buffer_mib > 0 else None,
        rtt_max_s=tb.rtt_max_s,
        rto_max_s=tb.rto_max_s,
        bandwidth_sum_kbps=tb.bandwidth_sum_kbps,
        rtt_source="+".join(sorted(sources)),
        rto_source="measurements" if summary and summary.rto_ms else "RFC 6298 from RTT",
    )
