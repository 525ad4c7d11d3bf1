"""Per-frame evidence of a paced (streaming) probe, whichever backend measured it.

A frame is what the application hands to the socket at once (a video frame). Its record holds
the send time (the sender's clock when it was written), the receive time of its last byte (the
receiver's clock), hence its one-way delay, and whether it never arrived. From the records:

- **delay**: receive - send. In the emulated testbed both ends share one clock, so this is the
  one-way delay (``clock="shared"``). Between hosts the clocks differ: the receive stamps are
  put on the sender's clock by the offset estimated on the probe's control connection
  (`probes.clocksync`), and the delays are one-way within its uncertainty (``clock="offset"``,
  the offset and uncertainty beside them). Where that uncertainty is more than ``delta`` of the
  least delay, the one-way figures would be mostly the offset's error: ``clock="relative"``
  then reports every delay relative to the flow's minimum (the offset cancels; what remains is
  queueing and reassembly wait, not the path's propagation delay).
- **jitter**: RFC 3550's estimator J += (|D| - J) / 16 over consecutive received frames, D the
  difference of their transit times; the value after the last frame (what RFC 3550 reports),
  its mean over the run and its largest value.
- **late**: received frames whose delay exceeds the budget (none without a budget).
- **head-of-line wait** (``hol_ms``): delay minus the minimum delay over the flow. The minimum
  is the best the fastest path delivered a frame in (propagation plus serialisation, no queue,
  no waiting), so this is at least the time a frame waited beyond the fastest path's delay:
  queueing on its own path plus reassembly wait behind data on slower subflows. It is a lower
  bound on neither alone; it is the delay a single fast path would not have added.
- **lost**: frames sent but never completely received within the run.
- **floor** (``delay_floor_ms``, one-way delays only): the least one-way delay the paths can
  have, where it is known. A minimum delay below it (less ``FLOOR_TOLERANCE_MS`` and the clock
  offset's uncertainty) is no measurement but a wrong clock or a wrong path: the probe fails
  with that reason (``below_floor``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from probes.clocksync import ClockOffset

Clock = Literal["shared", "offset", "relative"]
#: one-way delays only while the clock offset's uncertainty is at most this share of the least
#: delay (the answer's default δ; a campaign's answer applies its own,
#`flows.answers.stream_answer`)
DELTA = 0.07
FRAMES_ARTIFACT = "frames.csv"
_CSV_HEADER = "seq,send_us,recv_us,size_bytes,delay_ms,hol_ms"
#: how far below the path's floor a minimum delay may read (clock reads, rounding to µs)
FLOOR_TOLERANCE_MS = 1.0


@dataclass(frozen=True)
class FrameRecord:
    seq: int  #: frame number, from 0 in send order
    send_us: int  #: sender's clock, microseconds (since the epoch, or the host's monotonic clock)
    recv_us: int | None  #: receiver's clock at the frame's last byte; None = lost
    size_bytes: int

    @property
    def delay_ms(self) -> float | None:
        return None if self.recv_us is None else (self.recv_us - self.send_us) / 1000.0


class FrameStats(BaseModel):
    """One paced probe's frame figures (milliseconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unit: Literal["frame", "message"] = "frame"  #: message: frame boundaries unknown (VBR)
    clock: Clock = "shared"
    frames_sent: int
    frames_received: int
    frames_lost: int
    lost_fraction: float
    delay_mean_ms: float | None = None
    delay_p50_ms: float | None = None
    delay_p95_ms: float | None = None
    delay_p99_ms: float | None = None
    delay_max_ms: float | None = None
    delay_min_ms: float | None = None
    jitter_ms: float | None = None  #: RFC 3550 J after the last frame
    jitter_mean_ms: float | None = None  #: mean of J over the frames
    jitter_max_ms: float | None = None  #: largest J over the frames
    budget_ms: float | None = None
    late_frames: int = 0  #: received over the budget
    hol_mean_ms: float | None = None
    hol_p99_ms: float | None = None
    hol_max_ms: float | None = None
    delay_floor_ms: float | None = None  #: the paths' least one-way delay, where known
    #: the receiver's clock minus the sender's as estimated, and its uncertainty (hosts apart)
    clock_offset_ms: float | None = None
    clock_offset_uncertainty_ms: float | None = None
    #: why the stream ended early: the sender could not write within its duration plus a
    #: margin (the connection stalled); its unwritten frames count as lost
    stalled: str | None = None

    def below_floor(self) -> str | None:
        """Why the delays cannot be true: the fastest frame beat the fastest path."""
        if self.clock == "relative" or self.delay_floor_ms is None or self.delay_min_ms is None:
            return None
        slack = FLOOR_TOLERANCE_MS + (self.clock_offset_uncertainty_ms or 0.0)
        if self.delay_min_ms >= self.delay_floor_ms - slack:
            return None
        return (f"one-way delay below the path's floor: minimum {self.delay_min_ms:.2f} ms, "
                f"no path is faster than {self.delay_floor_ms:g} ms")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on sorted values."""
    if not sorted_values:
        raise ValueError("percentile of nothing")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def rfc3550_jitter(delays_ms: Iterable[float]) -> list[float]:
    """The running estimate J after each frame (the first frame leaves J at 0)."""
    out: list[float] = []
    j = 0.0
    prev: float | None = None
    for d in delays_ms:
        if prev is not None:
            j += (abs(d - prev) - j) / 16.0
        prev = d
        out.append(j)
    return out


def after_warmup(records: Sequence[FrameRecord], warmup_s: float) -> list[FrameRecord]:
    """The frames sent from `warmup_s` after the first one on: the probe's figures leave out
    the connection's start (slow start, joins) as its goodput does; ``frames.csv`` keeps all."""
    if not records:
        return []
    start = min(r.send_us for r in records)
    return [r for r in records if r.send_us - start >= warmup_s * 1e6]


def one_way_trusted(min_delay_ms: float, uncertainty_ms: float, delta: float = DELTA) -> bool:
    """Whether delays whose clocks are known within `uncertainty_ms` read as one-way: the
    uncertainty is at most `delta` of the least delay."""
    return uncertainty_ms <= delta * max(0.0, min_delay_ms)


def frame_stats(records: Sequence[FrameRecord], *, budget_ms: float | None = None,
                clock: Clock = "shared", unit: Literal["frame", "message"] = "frame",
                warmup_s: float = 0.0, floor_ms: float | None = None,
                offset: ClockOffset | None = None, delta: float = DELTA) -> FrameStats:
    """The figures of the frames sent after `warmup_s` (see `after_warmup`); `floor_ms`: the
    paths' least one-way delay, where known. `offset`: the clock offset the records' receive
    stamps were corrected by (hosts apart): one-way delays within its uncertainty, or relative
    ones where it is more than `delta` of the least delay."""
    records = after_warmup(records, warmup_s)
    if offset is not None:
        clock = "offset"
    received = [r for r in sorted(records, key=lambda r: r.seq) if r.recv_us is not None]
    sent = len(records)
    lost = sent - len(received)
    base = dict(unit=unit, clock=clock, frames_sent=sent, frames_received=len(received),
                frames_lost=lost, lost_fraction=lost / sent if sent else 0.0, budget_ms=budget_ms,
                delay_floor_ms=floor_ms)
    if offset is not None:
        base.update(clock_offset_ms=offset.offset_ms,
                    clock_offset_uncertainty_ms=offset.uncertainty_ms)
    if not received:
        return FrameStats(**base)
    delays = [r.delay_ms for r in received]
    assert all(d is not None for d in delays)
    raw = [float(d) for d in delays if d is not None]
    lowest = min(raw)
    if offset is not None and not one_way_trusted(lowest, offset.uncertainty_ms, delta):
        clock = base["clock"] = "relative"
    # relative clocks: only differences mean anything, so the minimum is the zero
    shown = [d - lowest for d in raw] if clock == "relative" else raw
    ordered = sorted(shown)
    hol = sorted(d - lowest for d in raw)
    jit = rfc3550_jitter(raw)
    return FrameStats(
        **base, delay_mean_ms=sum(shown) / len(shown), delay_p50_ms=percentile(ordered, 50),
        delay_p95_ms=percentile(ordered, 95), delay_p99_ms=percentile(ordered, 99),
        delay_max_ms=ordered[-1], delay_min_ms=ordered[0], jitter_ms=jit[-1],
        jitter_mean_ms=sum(jit) / len(jit), jitter_max_ms=max(jit),
        late_frames=sum(d > budget_ms for d in shown) if budget_ms is not None else 0,
        hol_mean_ms=sum(hol) / len(hol), hol_p99_ms=percentile(hol, 99), hol_max_ms=hol[-1])


def frames_csv(records: Sequence[FrameRecord]) -> str:
    """The raw per-frame file kept with the probe (``FRAMES_ARTIFACT``)."""
    delays = [r.delay_ms for r in records if r.delay_ms is not None]
    lowest = min(delays) if delays else 0.0
    lines = [_CSV_HEADER]
    for r in records:
        d = r.delay_ms
        lines.append(f"{r.seq},{r.send_us},{'' if r.recv_us is None else r.recv_us},"
                     f"{r.size_bytes},{'' if d is None else f'{d:.3f}'},"
                     f"{'' if d is None else f'{d - lowest:.3f}'}")
    return "\n".join(lines) + "\n"


def read_frames_csv(text: str) -> list[FrameRecord]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or lines[0] != _CSV_HEADER:
        raise ValueError(f"frames file: header must be {_CSV_HEADER!r}")
    out = []
    for ln in lines[1:]:
        seq, send, recv, size, *_ = ln.split(",")
        out.append(FrameRecord(int(seq), int(send), int(recv) if recv else None, int(size)))
    return out


def goodput_series(records: Sequence[FrameRecord], start_us: int, interval_s: float = 1.0,
                   duration_s: float | None = None) -> list[tuple[float, float]]:
    """(interval end s since start, Mbit/s) of the frames' bytes by receive time. With
    `duration_s`, only the whole intervals of the sending time: the frames that arrive after it
    (the last ones, one path delay late) would make a short, thin interval of their own."""
    got = [(r.recv_us - start_us, r.size_bytes) for r in records if r.recv_us is not None]
    if not got:
        return []
    step = int(interval_s * 1e6)
    n = max(t for t, _ in got) // step + 1
    if duration_s is not None:
        n = min(n, max(1, int(duration_s / interval_s)))
    buckets = [0] * int(n)
    for t, size in got:
        if max(0, t) // step < n:
            buckets[max(0, t) // step] += size
    return [((i + 1) * interval_s, b * 8 / interval_s / 1e6) for i, b in enumerate(buckets)]


def delay_cdf(records: Sequence[FrameRecord], warmup_s: float = 0.0,
              max_points: int = 200) -> list[tuple[float, float]]:
    """(delay ms, fraction of frames sent) of the frames sent after `warmup_s`: the share of
    frames that arrived within that delay. Counted against frames *sent*, so a run that lost
    frames ends below 1 (the lost fraction is the gap). At most `max_points` steps, evenly
    spaced in rank, the last (slowest) frame always kept."""
    kept = after_warmup(records, warmup_s)
    delays = sorted(d for r in kept if (d := r.delay_ms) is not None)
    if not delays:
        return []
    sent = len(kept)
    step = max(1, math.ceil(len(delays) / max_points))
    ranks = list(range(step - 1, len(delays), step))
    if ranks[-1] != len(delays) - 1:
        ranks.append(len(delays) - 1)
    return [(delays[i], (i + 1) / sent) for i in ranks]


def hol_timeline(records: Sequence[FrameRecord], warmup_s: float = 0.0
                 ) -> tuple[list[tuple[float, float]], list[float]]:
    """One probe's head-of-line wait over time after `warmup_s`: (send time s since the first
    frame kept, hol ms) per received frame, and the send times of the lost frames."""
    kept = sorted(after_warmup(records, warmup_s), key=lambda r: r.send_us)
    if not kept:
        return [], []
    start = kept[0].send_us
    delays = [d for r in kept if (d := r.delay_ms) is not None]
    lowest = min(delays) if delays else 0.0
    got = [((r.send_us - start) / 1e6, r.delay_ms - lowest) for r in kept
           if r.delay_ms is not None]
    lost = [(r.send_us - start) / 1e6 for r in kept if r.recv_us is None]
    return got, lost
