"""One probe over time, as the dashboard's probe page draws it (`figures.PROBE_*`): its stored
goodput series and bytes per subflow, and, where the tool gave them (iperf3's `-J` intervals),
RTT, cwnd and retransmits per stream and interval. Reads what was stored; never re-runs."""

from __future__ import annotations

import json
import math
from typing import Any

from . import figures

#: the raw output iperf3's sender wrote (`probes.tools.iperf3.add_run_artifacts`)
IPERF3_CLIENT = "iperf3-client.json"
#: iperf3 interval fields drawn: (figure, field, scale to the figure's unit)
IPERF3_FIELDS = (
    (figures.PROBE_RTT, "rtt", 1e-3),  # microseconds -> ms
    (figures.PROBE_CWND, "snd_cwnd", 1 / 1024),  # bytes -> KiB
    (figures.PROBE_RETRANSMITS, "retransmits", 1.0),
)
MIB = 1024 * 1024


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def goodput_chart(goodput_mbps: list[float], interval_s: float, warmup_s: float) -> dict | None:
    points = [[round((k + 1) * interval_s, 6), _number(v)] for k, v in enumerate(goodput_mbps)]
    points = [p for p in points if p[1] is not None]
    if not points:
        return None
    return {"id": "probe-goodput", "axes": figures.PROBE_GOODPUT.as_json(), "warmup_s": warmup_s,
            "series": [{"label": "goodput", "points": points}]}


def subflow_bytes_chart(subflow_bytes: dict[str, int]) -> dict | None:
    items = [(name, _number(n)) for name, n in sorted(subflow_bytes.items())]
    items = [(name, n) for name, n in items if n is not None]
    if not items:
        return None
    return {"id": "probe-subflow-bytes", "axes": figures.PROBE_SUBFLOW_BYTES.as_json(),
            "labels": [name for name, _ in items],
            "values": [round(n / MIB, 3) for _, n in items]}


def iperf3_charts(text: str | bytes) -> list[dict]:
    """RTT, cwnd and retransmits over time per stream from iperf3's sender JSON; [] when the
    document is not that (another tool, a failed run, a truncated file)."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return []
    intervals = doc.get("intervals") if isinstance(doc, dict) else None
    if not isinstance(intervals, list):
        return []
    charts = []
    for spec, key, scale in IPERF3_FIELDS:
        per_stream: dict[str, list[list[float]]] = {}
        for interval in intervals:
            streams = interval.get("streams") if isinstance(interval, dict) else None
            for stream in streams if isinstance(streams, list) else []:
                if not isinstance(stream, dict):
                    continue
                end, value = _number(stream.get("end")), _number(stream.get(key))
                if end is None or value is None:
                    continue
                label = f"stream {stream.get('socket', '?')}"
                per_stream.setdefault(label, []).append([end, round(value * scale, 6)])
        if per_stream:
            charts.append({"id": spec.name, "axes": spec.as_json(),
                           "series": [{"label": label, "points": pts}
                                      for label, pts in per_stream.items()]})
    return charts
