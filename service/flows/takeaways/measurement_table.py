"""A campaign's measurements as one table for analysis: one row per probe with its configuration
and figures, typed columns, units in the names (docs/formats.md, "Measurements table").

The columns are defined once (`COLUMNS`: name, Arrow type, how it is read off a row); the CSV and
the Parquet file are two writings of the same rows. Parquet keeps the types (timestamps in UTC,
nullable integers, booleans); CSV writes an empty field for a missing value.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from models import MEASUREMENT_PHASES, Measurement

MIB = 1 << 20
FORMATS = ("csv", "parquet")
PHASES = MEASUREMENT_PHASES
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


def _series(m: Measurement) -> list[float]:
    return [float(v) for v in (m.goodput_mbps or [])]


def _stat(fn: Callable[[list[float]], float], least: int = 1):
    def read(m: Measurement) -> float | None:
        s = _series(m)
        return fn(s) if len(s) >= least else None
    return read


def _rtt(fn):
    def read(m: Measurement) -> float | None:
        values = [float(v) for v in (m.rtt_ms or {}).values() if v]
        return fn(values) if values else None
    return read


def _buffer(key: str):
    def read(m: Measurement) -> int | None:
        value = (m.effective_buffers or {}).get(key)
        return int(value) if isinstance(value, int | float) else None
    return read


def _quiet(key: str):
    def read(m: Measurement) -> Any:
        return (m.quiet_check or {}).get(key)
    return read


#: (column, Arrow type, reader). Units: Mbit/s, MiB, bytes, seconds, milliseconds, as named.
COLUMNS: list[tuple[str, pa.DataType, Callable[[Measurement], Any]]] = [
    ("measurement_id", pa.int64(), lambda m: m.id),
    ("campaign_id", pa.int64(), lambda m: m.campaign_id),
    ("phase", pa.string(), lambda m: m.phase),
    ("status", pa.string(), lambda m: m.status),
    ("error", pa.string(), lambda m: m.error),
    ("pm", pa.string(), lambda m: m.pm),
    ("cc", pa.string(), lambda m: m.cc),
    ("buffer_mib", pa.float64(), lambda m: m.bs_mib),
    ("buffer_bytes", pa.int64(), lambda m: round(m.bs_mib * MIB)),
    ("run", pa.int32(), lambda m: m.run),
    # the impact run's excluded subflow, a selection run's probed subset (only:A+B), or ""
    ("variant", pa.string(), lambda m: m.excluded_subflow),
    ("subflows", pa.string(), lambda m: "+".join(m.subflows or [])),  # the ones carrying data
    ("subflow_count", pa.int32(), lambda m: len(m.subflows or [])),
    ("duration_s", pa.float64(), lambda m: m.duration_s),
    ("interval_s", pa.float64(), lambda m: m.interval_s),
    ("warmup_s", pa.float64(), lambda m: m.warmup_s),
    ("intervals", pa.int32(), lambda m: len(_series(m))),
    ("mean_goodput_mbps", pa.float64(), lambda m: m.mean_goodput_mbps),
    ("min_goodput_mbps", pa.float64(), _stat(min)),
    ("max_goodput_mbps", pa.float64(), _stat(max)),
    ("stdev_goodput_mbps", pa.float64(), _stat(statistics.stdev, least=2)),
    ("acked_bytes", pa.int64(), lambda m: sum(int(v) for v in (m.subflow_bytes or {}).values())),
    ("min_rtt_ms", pa.float64(), _rtt(min)),
    ("max_rtt_ms", pa.float64(), _rtt(max)),
    ("sender_sndbuf_bytes", pa.int64(), _buffer("sender_sndbuf")),
    ("sender_rcvbuf_bytes", pa.int64(), _buffer("sender_rcvbuf")),
    ("receiver_sndbuf_bytes", pa.int64(), _buffer("receiver_sndbuf")),
    ("receiver_rcvbuf_bytes", pa.int64(), _buffer("receiver_rcvbuf")),
    ("quiet", pa.bool_(), _quiet("quiet")),
    ("quiet_wait_s", pa.float64(), _quiet("waited_s")),
    # two hosts' clocks: the receiver's minus the sender's, and its uncertainty (stream probes)
    ("clock_offset_ms", pa.float64(), lambda m: m.clock_offset_ms),
    ("clock_offset_uncertainty_ms", pa.float64(), lambda m: m.clock_offset_uncertainty_ms),
    ("tool", pa.string(), lambda m: m.tool),
    ("tool_version", pa.string(), lambda m: m.tool_version),
    ("started_at", pa.timestamp("us", tz="UTC"), lambda m: m.started_at),
    ("finished_at", pa.timestamp("us", tz="UTC"), lambda m: m.finished_at),
]
SCHEMA = pa.schema([pa.field(name, kind) for name, kind, _ in COLUMNS])


def table_rows(measurements: Sequence[Measurement]) -> list[dict[str, Any]]:
    """One dict per probe, in COLUMNS' order; non-finite figures are missing values."""
    out = []
    for m in measurements:
        row = {}
        for name, _kind, read in COLUMNS:
            value = read(m)
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            row[name] = value
        out.append(row)
    return out


def to_parquet(rows: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), buf, compression="zstd")
    return buf.getvalue()


def to_csv(rows: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([name for name, _, _ in COLUMNS])
    for row in rows:
        writer.writerow([_csv_value(row[name]) for name, _, _ in COLUMNS])
    return buf.getvalue().encode()


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def render(measurements: Sequence[Measurement], fmt: str) -> bytes:
    """The table in `fmt` ("csv" or "parquet")."""
    rows = table_rows(measurements)
    return to_parquet(rows) if fmt == "parquet" else to_csv(rows)
