"""The bottleneck queue of every emulated link: a stated scenario parameter.

Each ISP link has a tbf in each direction (site egress at the up rate, core egress at the down
rate). Its queue (tbf ``limit``) is, by precedence: the ISP's ``queue_ms`` / ``queue_packets``,
the testbed's ``queue_ms`` / ``queue_packets``, else the default: one BDP of the slowest path
over that link (2 x its one-way delay) at the link's rate, clamped to 20..500 ms, and never
under ``MIN_PACKETS`` full frames (tbf must hold at least one frame besides the one in
service). Not 16 frames: that floor made 3.8 s of queue on a 51 kbit/s ADSL uplink.
"""

from __future__ import annotations

from typing import Any

from probes.testbed.spec import TestbedSpec

FRAME_BYTES = 1514  # what tbf counts per full-sized packet (Ethernet header included)
MIN_PACKETS = 2
DEFAULT_MS_RANGE = (20.0, 500.0)


def link_queue(spec: TestbedSpec, site_index: int, label: str, rate_kbps: float
               ) -> dict[str, Any]:
    """{bytes, packets, ms, source} of the queue of one ISP link direction at ``rate_kbps``."""
    isp = spec.sites[site_index].isp(label)
    bytes_per_ms = rate_kbps * 1000 / 8 / 1000
    if isp.queue_packets is not None or isp.queue_ms is not None:
        ms, packets, source = isp.queue_ms, isp.queue_packets, "isp"
    elif spec.queue_packets is not None or spec.queue_ms is not None:
        ms, packets, source = spec.queue_ms, spec.queue_packets, "testbed"
    else:
        delays = [p.delay_ms for p in spec.resolved_paths()
                  if (p.a_label if site_index == 0 else p.b_label) == label]
        lo, hi = DEFAULT_MS_RANGE
        ms, packets, source = min(hi, max(lo, 2.0 * max(delays, default=0.0))), None, "default"
    size = packets * FRAME_BYTES if packets is not None else int(bytes_per_ms * (ms or 0.0))
    size = max(size, MIN_PACKETS * FRAME_BYTES)
    return {"bytes": size, "packets": round(size / FRAME_BYTES, 1),
            "ms": round(size / bytes_per_ms, 1), "source": source}


def queue_table(spec: TestbedSpec) -> list[dict[str, Any]]:
    """Every link and direction with its rate and queue, for status and documentation."""
    rows = []
    for i, site in enumerate(spec.sites):
        for isp in site.isps:
            for direction, kbps in (("up", isp.up_kbps), ("down", isp.down_kbps)):
                rate = kbps * spec.rate_scale
                rows.append({"site": site.name, "isp": isp.label, "direction": direction,
                             "rate_kbps": rate, **link_queue(spec, i, isp.label, rate)})
    return rows
