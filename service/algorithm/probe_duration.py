"""How long a probe must run, and how much of its start to leave out, to measure the steady rate.

A bulk probe starts in slow start: the congestion window doubles once per RTT from the initial
window (10 segments) until it covers what the path can hold, the bandwidth-delay product, or the
socket buffer when that is smaller. At 300 ms RTT and 24 Mbit/s that takes about seven RTTs, over
two seconds, before the subflows' joins and a loss or two stretch it further, so a fixed 5 s probe
with a 2 s warm-up measures mostly slow start. The rule here derives both figures from the
paths instead:

    target window  W = min(sum of the subflows' bandwidths x the longest RTT, buffer)
    warm-up        = longest RTT x (ceil(log2(W / initial window)) + margin), at least a floor
                     of RTTs and at least the probes' default warm-up (2 s), rounded up to the
                     tool's interval (goodput is averaged over whole intervals)
    duration       = max(configured duration, warm-up + a floor of measured RTTs and seconds),
                     rounded up to whole seconds (iperf3 runs whole seconds)

The longest RTT and the summed bandwidth are deliberately pessimistic: an MPTCP connection's
window is shared by its subflows, and the slowest subflow to ramp up decides when the aggregate
rate is steady. Every input is returned with the result so that a stored probe says why it ran as
long as it did.

Beside the a-priori rule, `steady_state` reads a probe's interval series: the first window of k
intervals whose relative spread and trend are both small is where the rate settled, and a probe
whose last k intervals are not steady never settled (its mean is no steady-state figure).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: RFC 6928's initial window (10 segments) of a 1448-byte MSS (1500-byte MTU, timestamps on).
DEFAULT_MSS_BYTES = 1448
DEFAULT_INITIAL_WINDOW_SEGMENTS = 10
#: RTTs added to the doubling rounds: the MP_JOIN handshakes of the other subflows (one RTT after
#: the first is established) and the round in which slow start overshoots and backs off.
DEFAULT_MARGIN_RTTS = 3.0
#: Warm-up is never shorter than this many RTTs, however small the window to reach.
DEFAULT_MIN_WARMUP_RTTS = 4.0
#: After the warm-up, at least this many RTTs are measured ...
DEFAULT_MIN_MEASURE_RTTS = 20.0
#: ... and at least this many seconds (three 1 s intervals of the tools' series).
DEFAULT_MIN_MEASURE_S = 3.0
#: The probes' default warm-up (probes.base.DEFAULT_WARMUP_S): the rule never measures more of a
#: probe's start than the probes did before it, so short-RTT figures stay comparable.
DEFAULT_MIN_WARMUP_S = 2.0
#: The tools' interval: the warm-up is a whole number of intervals.
DEFAULT_INTERVAL_S = 1.0
#: MeasurementRequest's upper bound on a probe's duration.
MAX_DURATION_S = 3600.0
RULE = "slow-start-to-bdp/v1"


@dataclass(frozen=True)
class ProbeTiming:
    """A probe's warm-up and duration, with every input the rule used (stored with the probe)."""

    warmup_s: float
    duration_s: float
    #: why the figures are what they are: "rule", or "configured" (the configured duration
    #: already covers warm-up + measurement), or "no-rtt" (an RTT is unknown: configured figures)
    decided_by: str
    # --- inputs ---
    rtt_min_ms: float | None
    rtt_max_ms: float | None
    bandwidth_kbps: float
    buffer_bytes: int | None
    configured_duration_s: float
    mss_bytes: int
    initial_window_segments: int
    margin_rtts: float
    min_warmup_rtts: float
    min_warmup_s: float
    interval_s: float
    min_measure_rtts: float
    min_measure_s: float
    # --- derived ---
    bdp_bytes: float | None  #: summed bandwidth x longest RTT
    target_window_bytes: float | None  #: min(BDP, buffer): where slow start ends
    slow_start_rounds: int | None  #: doublings from the initial window to the target window
    measure_s: float  #: duration - warm-up: the part goodput is averaged over
    capped: bool = False  #: the rule wanted more than MAX_DURATION_S
    rule: str = RULE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: must be a positive number, got {value!r}")
    return float(value)


def _configured_warmup(duration_s: float) -> float:
    """The probes' default warm-up (min(2 s, duration / 2)), kept when the rule cannot run."""
    return min(2.0, duration_s / 2)


def probe_timing(
    links: Sequence[tuple[float, float | None]],
    configured_duration_s: float,
    *,
    buffer_bytes: int | None = None,
    mss_bytes: int = DEFAULT_MSS_BYTES,
    initial_window_segments: int = DEFAULT_INITIAL_WINDOW_SEGMENTS,
    margin_rtts: float = DEFAULT_MARGIN_RTTS,
    min_warmup_rtts: float = DEFAULT_MIN_WARMUP_RTTS,
    min_warmup_s: float = DEFAULT_MIN_WARMUP_S,
    interval_s: float = DEFAULT_INTERVAL_S,
    min_measure_rtts: float = DEFAULT_MIN_MEASURE_RTTS,
    min_measure_s: float = DEFAULT_MIN_MEASURE_S,
    max_duration_s: float = MAX_DURATION_S,
) -> ProbeTiming:
    """Warm-up and duration of one probe over the subflows `links` that carry its data.

    `links`: per subflow in use, (bandwidth kbit/s, RTT ms or None) -- the topology's figures,
    or measured ones (the RTT ss reports as minrtt). `buffer_bytes`: the socket buffer the probe
    sets (None: kernel autotuning, no cap on the window). `configured_duration_s`: the plan's
    duration, a lower bound.
    """
    configured = _positive("configured_duration_s", configured_duration_s)
    if not links:
        raise ValueError("links: at least one subflow (bandwidth kbit/s, RTT ms)")
    bandwidths = [_positive(f"links[{k}] bandwidth", bw) for k, (bw, _) in enumerate(links)]
    rtts = [rtt for _, rtt in links]
    for k, rtt in enumerate(rtts):
        if rtt is not None:
            _positive(f"links[{k}] RTT", rtt)
    if buffer_bytes is not None:
        _positive("buffer_bytes", buffer_bytes)
    for name, v in (("mss_bytes", mss_bytes), ("initial_window_segments", initial_window_segments),
                    ("min_measure_rtts", min_measure_rtts), ("max_duration_s", max_duration_s),
                    ("interval_s", interval_s)):
        _positive(name, v)
    for name, v in (("margin_rtts", margin_rtts), ("min_warmup_rtts", min_warmup_rtts),
                    ("min_warmup_s", min_warmup_s), ("min_measure_s", min_measure_s)):
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name}: must be a non-negative number, got {v!r}")
    bandwidth = sum(bandwidths)
    common = dict(bandwidth_kbps=bandwidth, buffer_bytes=buffer_bytes,
                  configured_duration_s=configured, mss_bytes=mss_bytes,
                  initial_window_segments=initial_window_segments, margin_rtts=margin_rtts,
                  min_warmup_rtts=min_warmup_rtts, min_warmup_s=min_warmup_s,
                  interval_s=interval_s, min_measure_rtts=min_measure_rtts,
                  min_measure_s=min_measure_s)
    known = [float(r) for r in rtts if r is not None]
    if len(known) != len(rtts):
        warmup = _configured_warmup(configured)
        return ProbeTiming(
            warmup_s=warmup, duration_s=configured, decided_by="no-rtt",
            rtt_min_ms=min(known) if known else None, rtt_max_ms=max(known) if known else None,
            bdp_bytes=None, target_window_bytes=None, slow_start_rounds=None,
            measure_s=configured - warmup, **common)
    rtt_s = max(known) / 1000.0
    bdp = bandwidth * 1000.0 / 8.0 * rtt_s
    target = bdp if buffer_bytes is None else min(bdp, float(buffer_bytes))
    initial = float(mss_bytes * initial_window_segments)
    rounds = max(0, math.ceil(math.log2(target / initial))) if target > initial else 0
    warmup = max(rtt_s * max(rounds + margin_rtts, min_warmup_rtts), min_warmup_s)
    warmup = interval_s * math.ceil(warmup / interval_s - 1e-9)
    measure = max(min_measure_rtts * rtt_s, min_measure_s)
    wanted = warmup + measure
    duration = max(configured, float(math.ceil(wanted - 1e-9)))
    decided_by = "rule" if duration > configured else "configured"
    capped = duration > max_duration_s
    if capped:
        duration = max_duration_s
        warmup = min(warmup, duration / 2)
    warmup = round(warmup, 3)
    return ProbeTiming(
        warmup_s=warmup, duration_s=duration, decided_by=decided_by,
        rtt_min_ms=min(known), rtt_max_ms=max(known), bdp_bytes=round(bdp, 1),
        target_window_bytes=round(target, 1), slow_start_rounds=rounds,
        measure_s=round(duration - warmup, 3), capped=capped, **common)


# --- steady state of a measured series -----------------------------------------------------------
DEFAULT_WINDOW = 5
#: the window's coefficient of variation (stdev / mean) must be at most this ...
DEFAULT_MAX_CV = 0.10
#: ... and its least-squares trend over the window, relative to its mean, at most this
DEFAULT_MAX_TREND = 0.10


@dataclass(frozen=True)
class SteadyState:
    """Where an interval series settled, and whether its end is steady."""

    settled: bool  #: the last `window` intervals are steady
    settled_at_s: float | None  #: start of the first steady window (None: none was)
    last_cv: float | None  #: coefficient of variation of the last window
    last_trend: float | None  #: relative change over the last window (slope x span / mean)
    window: int
    max_cv: float
    max_trend: float
    intervals: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _window_stats(t: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    mean = float(v.mean())
    if mean <= 0:
        return math.inf, math.inf
    cv = float(v.std(ddof=1)) / mean if len(v) > 1 else 0.0
    span = float(t[-1] - t[0])
    slope = float(np.polyfit(t, v, 1)[0]) if span > 0 else 0.0
    return cv, abs(slope * span) / mean


def steady_state(
    series: Sequence[tuple[float, float]],
    *,
    window: int = DEFAULT_WINDOW,
    max_cv: float = DEFAULT_MAX_CV,
    max_trend: float = DEFAULT_MAX_TREND,
) -> SteadyState:
    """Steady-state test on a (interval end s, Mbit/s) series.

    A window of `window` consecutive intervals is steady when its coefficient of variation is at
    most `max_cv` and its fitted linear change across the window is at most `max_trend` of its
    mean (a ramp still climbing out of slow start fails the trend test even when smooth).
    `settled_at_s` is where the first steady window starts (the interval before its first end);
    a series whose last window is not steady did not settle within the probe.
    """
    if not (isinstance(window, int) and window >= 2):
        raise ValueError(f"window: at least 2 intervals, got {window!r}")
    for name, v in (("max_cv", max_cv), ("max_trend", max_trend)):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name}: must be a positive number, got {v!r}")
    pts = [(float(t), float(x)) for t, x in series]
    if any(not (math.isfinite(t) and math.isfinite(x)) for t, x in pts):
        raise ValueError("series: non-finite value")
    t = np.array([p[0] for p in pts])
    v = np.array([p[1] for p in pts])
    n = len(pts)
    if n < window:
        return SteadyState(False, None, None, None, window, max_cv, max_trend, n)
    first: float | None = None
    cv = trend = math.inf
    for i in range(n - window + 1):
        cv, trend = _window_stats(t[i:i + window], v[i:i + window])
        if first is None and cv <= max_cv and trend <= max_trend:
            first = float(t[i - 1]) if i > 0 else 0.0
    settled = cv <= max_cv and trend <= max_trend
    return SteadyState(settled, first, _finite(cv), _finite(trend), window, max_cv, max_trend, n)


def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def can_stop(
    series: Sequence[tuple[float, float]],
    timing: ProbeTiming,
    *,
    window: int = DEFAULT_WINDOW,
    max_cv: float = DEFAULT_MAX_CV,
    max_trend: float = DEFAULT_MAX_TREND,
) -> bool:
    """True when a running probe may end early: past the rule's warm-up, its series has settled
    and at least the rule's measurement floor (`min_measure_rtts` RTTs and `min_measure_s`) has
    been measured since it did."""
    state = steady_state(series, window=window, max_cv=max_cv, max_trend=max_trend)
    if not state.settled or state.settled_at_s is None or not series:
        return False
    start = max(state.settled_at_s, timing.warmup_s)
    rtt_s = (timing.rtt_max_ms or 0.0) / 1000.0
    floor = max(timing.min_measure_rtts * rtt_s, timing.min_measure_s)
    return float(series[-1][0]) - start >= floor
