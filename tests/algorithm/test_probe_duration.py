"""Probe warm-up and duration from the paths (slow start to the BDP), and the steady-state test."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithm.probe_duration import (
    ProbeTiming,
    can_stop,
    probe_timing,
    steady_state,
)

from .test_paper_tables import topology

# probes/testbed/scenarios/srl-hu.yaml: rates x 0.2, RTT = 2 x the paths' one-way delays
# (130-160 ms)
SRL_HU_RTT_MS = {"K-C": 300, "K-CU": 260, "P-C": 320, "P-CU": 290, "T-C": 320, "T-CU": 290,
                 "U-C": 280, "U-CU": 270}


def srl_hu_links(names=None):
    return [(sf.bandwidth_kbps * 0.2, SRL_HU_RTT_MS[sf.name])
            for sf in topology("SRL-HU").subflows() if names is None or sf.name in names]


def slow_start_series(duration_s, rtt_s, rate_mbps, mss=1448, iw=10, interval_s=1.0):
    """Mean rate per interval of a window doubling every RTT from `iw` segments up to the path's
    rate (the textbook slow start, no loss): what a probe's first seconds look like."""
    def rate(t):
        return min(iw * mss * 8 * 2 ** (t / rtt_s) / rtt_s / 1e6, rate_mbps)

    series, steps = [], 200
    for k in range(int(duration_s / interval_s)):
        a = k * interval_s
        mean = sum(rate(a + (j + 0.5) * interval_s / steps) for j in range(steps)) / steps
        series.append((a + interval_s, mean))
    return series


def test_srl_hu_five_second_probe_is_stretched_past_slow_start():
    t = probe_timing(srl_hu_links(), 5.0)
    # 48.4 Mbit/s summed x 320 ms = 1.94 MB; from 14.5 kB that is 8 doublings (2.56 s), + 3 RTTs
    assert t.bdp_bytes == pytest.approx(48_409.6 * 1000 / 8 * 0.32)
    assert t.slow_start_rounds == 8 == math.ceil(math.log2(t.bdp_bytes / 14_480))
    assert t.warmup_s == 4.0  # 11 x 0.32 = 3.52 s, rounded up to whole 1 s intervals
    assert t.duration_s == 11.0 and t.decided_by == "rule"
    assert t.measure_s >= 20 * 0.32  # the measurement floor of 20 RTTs
    assert (t.rtt_min_ms, t.rtt_max_ms) == (260.0, 320.0)
    # the probes' old default: 2 s of a 5 s probe left out; slow start alone lasts longer
    assert t.slow_start_rounds * 0.32 > 2.0


def test_srl_hu_fast_subset_alone_needs_less():
    all_ = probe_timing(srl_hu_links(), 5.0)
    uc = probe_timing(srl_hu_links({"U-C"}), 5.0)
    assert uc.bandwidth_kbps == 20_000 and uc.slow_start_rounds == 6
    assert uc.warmup_s <= all_.warmup_s and uc.duration_s <= all_.duration_s


def test_slow_start_of_a_five_second_probe_never_settles_but_the_rules_duration_does():
    """A 5 s probe on U-C (20 Mbit/s, 280 ms) has no steady window of five intervals; the
    rule's probe has, and it starts no later than the rule's warm-up."""
    t = probe_timing(srl_hu_links({"U-C"}), 5.0)
    short = steady_state(slow_start_series(5, 0.28, 20.0))
    assert not short.settled and short.settled_at_s is None
    long = steady_state(slow_start_series(t.duration_s, 0.28, 20.0))
    assert long.settled and long.settled_at_s is not None
    assert long.settled_at_s <= t.warmup_s
    assert can_stop(slow_start_series(t.duration_s, 0.28, 20.0), t)


def test_buffer_caps_the_window_slow_start_has_to_reach():
    t = probe_timing(srl_hu_links(), 5.0, buffer_bytes=64 * 1024)
    assert t.target_window_bytes == 65_536 and t.slow_start_rounds == 3
    assert t.warmup_s == 2.0  # (3 + 3) x 0.32 = 1.92 s, under the 2 s floor
    assert t.duration_s == 9.0  # 2 s + 20 x 0.32 s = 8.4 s, whole seconds


def test_short_paths_keep_the_configured_figures():
    t = probe_timing([(100_000, 20.0)], 30.0)
    assert (t.warmup_s, t.duration_s, t.decided_by) == (2.0, 30.0, "configured")


def test_unknown_rtt_falls_back_to_the_configured_figures():
    t = probe_timing([(100_000, None), (5_000, 40.0)], 5.0)
    assert (t.warmup_s, t.duration_s, t.decided_by) == (2.0, 5.0, "no-rtt")
    assert t.rtt_max_ms == 40.0 and t.bdp_bytes is None


def test_to_dict_keeps_inputs_and_result():
    d = probe_timing(srl_hu_links(), 5.0).to_dict()
    assert d["configured_duration_s"] == 5.0 and d["buffer_bytes"] is None
    assert d["duration_s"] == 11.0 and d["rule"] == "slow-start-to-bdp/v1"
    assert ProbeTiming(**d) == probe_timing(srl_hu_links(), 5.0)


def test_duration_is_capped_at_the_requests_limit():
    t = probe_timing([(1_000, 60_000.0)], 5.0)  # a 60 s RTT: 20 RTTs alone are 1200 s
    assert t.duration_s <= 3600 and t.warmup_s < t.duration_s
    t = probe_timing([(1_000, 200_000.0)], 5.0)
    assert t.capped and t.duration_s == 3600 and t.warmup_s < t.duration_s


@pytest.mark.parametrize("bad", [
    dict(links=[], configured_duration_s=5.0),
    dict(links=[(0, 10.0)], configured_duration_s=5.0),
    dict(links=[(1000, -1.0)], configured_duration_s=5.0),
    dict(links=[(1000, 10.0)], configured_duration_s=0.0),
    dict(links=[(1000, 10.0)], configured_duration_s=math.nan),
    dict(links=[(1000, 10.0)], configured_duration_s=5.0, buffer_bytes=0),
])
def test_invalid_inputs_are_refused(bad):
    with pytest.raises(ValueError):
        probe_timing(**bad)


@settings(max_examples=200, deadline=None)
@given(
    links=st.lists(st.tuples(st.floats(1, 1e6), st.floats(0.1, 2000)), min_size=1, max_size=8),
    configured=st.floats(0.5, 600),
    buffer=st.one_of(st.none(), st.integers(4096, 1 << 30)),
)
def test_rule_bounds(links, configured, buffer):
    t = probe_timing(links, configured, buffer_bytes=buffer)
    assert t.duration_s >= configured and 0 < t.warmup_s < t.duration_s
    rtt_s = max(r for _, r in links) / 1000
    assert t.warmup_s >= (t.slow_start_rounds or 0) * rtt_s - 1e-9
    assert t.measure_s >= max(20 * rtt_s, 3.0) - 1e-9
    # a longer RTT never asks for a shorter probe
    longer = probe_timing([(bw, r * 2) for bw, r in links], configured, buffer_bytes=buffer)
    assert longer.warmup_s >= t.warmup_s and longer.duration_s >= t.duration_s


def test_steady_state_finds_where_a_ramp_ends():
    series = [(1.0, 1.0), (2.0, 4.0), (3.0, 7.0), (4.0, 10.0), (5.0, 10.2), (6.0, 9.9),
              (7.0, 10.1), (8.0, 10.0), (9.0, 9.8)]
    s = steady_state(series)
    assert s.settled and s.settled_at_s == 3.0 and s.intervals == 9
    assert s.last_cv is not None and s.last_cv < 0.1


def test_steady_state_says_when_a_series_never_settled():
    climbing = [(float(k), 1.0 + 0.5 * k) for k in range(1, 11)]
    s = steady_state(climbing)
    assert not s.settled and s.settled_at_s is None and s.last_trend > 0.1
    swinging = [(float(k), 10.0 if k % 2 else 3.0) for k in range(1, 11)]
    assert not steady_state(swinging).settled
    assert not steady_state([(1.0, 5.0), (2.0, 5.0)]).settled  # fewer intervals than a window


def test_can_stop_waits_for_the_measurement_floor():
    t = probe_timing([(20_000, 280.0)], 5.0)  # warm-up 3 s, 20 RTTs = 5.6 s to measure
    flat = [(float(k), 10.0) for k in range(1, 8)]
    assert not can_stop(flat, t)  # 7 - 3 = 4 s measured
    assert can_stop([(float(k), 10.0) for k in range(1, 10)], t)  # 9 - 3 = 6 s


def test_steady_state_refuses_bad_arguments():
    with pytest.raises(ValueError):
        steady_state([(1.0, 1.0)], window=1)
    with pytest.raises(ValueError):
        steady_state([(1.0, math.inf)] * 5)
