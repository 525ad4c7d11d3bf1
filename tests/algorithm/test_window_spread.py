"""The spread inside probes widens the promise where the rate is bursty, and barely where it is
steady. The bursty runs are shaped like the ones measured on `asymmetric.yaml` at 2.06 MiB: the
receiver held the slow subflow's data, then released it at once (5.6, 5.6, 15.7, 8.2 Mbit/s a
second), so two runs' means agreed within 1 % while a fresh probe covering one more slow second
read 9.3."""

from __future__ import annotations

import math

import pytest

from probes.base import intervals_after_warmup, mean_after_warmup
from service.algorithm.window_spread import combined_half_width, window_spread
from service.flows.campaign.phases.fitting import timed_series

WARMUP_S = 2.0


def _run(values: list[float]):
    series = timed_series(values, 1.0)
    return series, [v for _, v in intervals_after_warmup(series, WARMUP_S)]


BURSTY = [_run([3.0, 7.0, 5.6, 5.6, 15.7, 13.0, 5.7, 5.5, 15.6, 13.2]),
          _run([3.2, 7.1, 5.5, 15.8, 13.1, 5.6, 5.6, 15.6, 12.6, 5.6])]
STEADY = [_run([3.0, 8.0, 9.9, 9.8, 10.0, 9.9, 9.8, 10.1, 9.9, 9.9]),
          _run([3.1, 8.1, 9.8, 9.9, 9.9, 10.0, 9.8, 9.9, 10.0, 9.8])]
CONFIDENCE = 0.9


def _run_to_run(runs) -> float:
    """The promise from the runs' means alone (t x sd x sqrt(1/n + 1)), as the decision has it."""
    from scipy import stats

    means = [mean_after_warmup(series, WARMUP_S) for series, _ in runs]
    mean = sum(means) / len(means)
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1))
    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(means) - 1))
    return mean, t * sd * math.sqrt(1 / len(means) + 1)


def test_bursty_runs_that_agree_still_promise_room_for_the_fresh_probe():
    mean, alone = _run_to_run(BURSTY)
    fresh = 9.3  # one more slow second than the runs: the fresh probe's reading
    assert abs(fresh - mean) > alone  # the runs' agreement alone promised too little
    spread = window_spread(BURSTY)
    assert spread is not None and spread.runs == 2 and spread.intervals_per_run == 8
    assert spread.unsteady  # by the probes' own steadiness rule, the rate never settled
    half = combined_half_width(alone, spread.half_width(CONFIDENCE))
    assert abs(fresh - mean) < half


def test_a_steady_rate_adds_little_and_is_not_flagged():
    _, alone = _run_to_run(STEADY)
    spread = window_spread(STEADY)
    assert spread is not None and not spread.unsteady
    within = spread.half_width(CONFIDENCE)
    assert within < 0.2  # Mbit/s, on 9.9
    assert combined_half_width(alone, within) < 1.1 * alone + 0.1


def test_a_short_probe_is_judged_on_what_its_warm_up_left_in():
    # 5 s probes: two seconds of slow start left out, three measured. Steady there is steady
    # (a 5-interval window that began in slow start called every such run unsteady); the
    # receiver's held-then-released bursts are not.
    ramp_then_steady = [_run([2.0, 9.0, 13.1, 13.0, 13.2]), _run([1.8, 8.7, 13.0, 13.1, 13.1])]
    spread = window_spread(ramp_then_steady)
    assert spread is not None and spread.intervals_per_run == 3 and not spread.unsteady
    bursts = [_run([3.0, 7.0, 5.6, 15.7, 8.2]), _run([3.1, 6.9, 5.6, 5.6, 15.6])]
    assert window_spread(bursts).unsteady


def test_too_little_to_say():
    assert window_spread([]) is None
    assert window_spread([_run([5.0, 6.0, 7.0])]) is None  # one measured interval
    short = window_spread([_run([5.0, 6.0, 7.0, 7.2])])  # too short to judge steadiness
    assert short is not None and not short.unsteady
    assert combined_half_width(None, None) is None
    assert combined_half_width(1.0, None) == 1.0
    assert combined_half_width(math.inf, 0.5) == math.inf
    assert combined_half_width(3.0, 4.0) == pytest.approx(5.0)
