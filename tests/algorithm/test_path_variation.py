"""A path that moves over time: its variation read off the campaign's own repeated probes, the
answer's interval widened to cover a fresh probe there, and the sweep not settled from runs of
one phase. The moving path is the shipped field-lte.yaml's LTE uplink, simulated: a 40 s cycle
of 10, 3, 6, 1.5 and 8 Mbit/s beside a steady 4 Mbit/s wired line, read in 1 s intervals with
3 % noise; probes of 5 measured seconds start at the times a sweep would run them."""

from __future__ import annotations

import random
from statistics import fmean

import pytest

from service.algorithm.adaptive.time_spread import (
    SETTLE_SPAN_S,
    VARYING_MAX_RUNS,
    VARYING_RUNS,
    VARYING_SPAN_S,
    spread_wanted,
)
from service.algorithm.adaptive.variation import (
    TimedRun,
    Variation,
    fresh_probe_range,
    path_variation,
)
from service.flows.campaign.phases.answer_spread import widened
from service.state.confidence_summary import confidence_statement

LTE_STEPS = [(0, 10.0), (8, 3.0), (14, 6.0), (24, 1.5), (30, 8.0)]  # field-lte.yaml, Mbit/s up
WIRED = 4.0
DELTA = 0.07


def _capacity(t: float) -> float:
    phase = t % 40
    return WIRED + [rate for start, rate in LTE_STEPS if phase >= start][-1]


def _probe(start: float, rng: random.Random, moving: bool = True) -> TimedRun:
    seconds = tuple((_capacity(start + k + 0.5) if moving else 10.0) * 0.9
                    * (1 + rng.gauss(0, 0.03)) for k in range(1, 6))
    return TimedRun(start, fmean(seconds), seconds)


def _campaign(rng: random.Random, moving: bool = True):
    """30 runs over 5 buffers of one arm, 7-12 s apart, as a sweep takes them; the answer's
    point is the one at 0.4 MiB, with 4 runs spread over the campaign."""
    t, points = rng.uniform(0, 40), {}
    for i in range(30):
        key = (("FullMesh", "bbr"), [0.1, 0.2, 0.4, 0.8, 1.6][i % 5])
        points.setdefault(key, []).append(_probe(t, rng, moving))
        t += rng.uniform(7, 12)
    return points, points[(("FullMesh", "bbr"), 0.4)][:4]


def test_runs_in_different_phases_of_a_capacity_cycle_are_called_varying():
    for seed in range(10):
        points, answer = _campaign(random.Random(seed))
        v = path_variation(points, answer, DELTA)
        assert v.varies, (seed, v)
        # the runs differ far more than the rate inside a run expects (5 s inside a 40 s cycle)
        assert v.between_rel_sd > 2 * v.expected_rel_sd
        assert v.runs == 4 and v.span_s > 60
        # the spread over time is read at the answer: its 1 s goodputs' 10th-90th percentile
        otp = fmean(r.mean_mbps for r in answer)
        assert v.p10_mbps < otp < v.p90_mbps and v.spread_mbps > 0.15 * otp
        assert v.run_low_mbps < otp < v.run_high_mbps
        assert v.spread_mbps == pytest.approx(v.p90_mbps - v.p10_mbps)
        assert v.to_dict()["varies"] is True


def test_a_steady_path_is_not_called_varying_and_its_promise_stands():
    for seed in range(10):
        points, answer = _campaign(random.Random(seed), moving=False)
        v = path_variation(points, answer, DELTA)
        assert not v.varies, (seed, v)
        assert fresh_probe_range(v, fmean(r.mean_mbps for r in answer), 4, 0.9) is None
        assert widened((8.5, 9.5), v, 9.0, 4, 0.9) == (8.5, 9.5)


def test_runs_that_differ_by_less_than_delta_do_not_make_a_path_varying():
    """Significant but immaterial: runs 2 % apart with a perfectly steady rate inside each."""
    runs = {(("FullMesh", "cubic"), bs): [TimedRun(0, 10.0, (10.0,) * 5),
                                         TimedRun(40, 10.2, (10.2,) * 5)]
            for bs in (0.1, 0.2, 0.4)}
    assert not path_variation(runs, runs[(("FullMesh", "cubic"), 0.4)], DELTA).varies


def test_the_widened_interval_covers_fresh_probes_of_a_varying_path():
    """Fresh probes at random phases of the cycle land in the answer's widened interval, 90 %
    or more of them on average over campaigns, where the quiet path's prediction interval
    (t x the answer's own runs' sd x sqrt(1 + 1/n)) would miss most of them."""
    from scipy import stats

    covered, quiet_covered = [], []
    for seed in range(20):
        rng = random.Random(seed)
        points, answer = _campaign(rng)
        v = path_variation(points, answer, DELTA)
        means = [r.mean_mbps for r in answer]
        otp = fmean(means)
        sd = (sum((m - otp) ** 2 for m in means) / (len(means) - 1)) ** 0.5
        half = float(stats.t.ppf(0.95, len(means) - 1)) * sd * (1 + 1 / len(means)) ** 0.5
        quiet = (otp - 0.1 * half, otp + 0.1 * half)  # a spread of one phase: a tenth of it
        low, high = widened(quiet, v, otp, len(answer), 0.9)
        assert low < quiet[0] and high > quiet[1]  # a spread with variation widens it
        fresh = [_probe(rng.uniform(0, 4000), rng).mean_mbps for _ in range(300)]
        covered.append(sum(low <= f <= high for f in fresh) / len(fresh))
        quiet_covered.append(sum(quiet[0] <= f <= quiet[1] for f in fresh) / len(fresh))
    assert fmean(covered) >= 0.93
    assert sorted(covered)[len(covered) // 10] >= 0.85  # nine campaigns in ten
    assert fmean(quiet_covered) < 0.5


def test_a_single_quiet_phase_does_not_settle():
    """Two runs of the answer 6 s apart are one phase: the decision waits for a run later."""
    assert spread_wanted([100.0, 106.0], [], None, False, 2, same_point=True) == "answer"
    # T*'s point is repeated in between when the answer's run was the last probe
    assert spread_wanted([100.0, 106.0], [50.0, 60.0], 90.0, False, 2,
                         same_point=False) == "t_star"
    # ... and the answer again once another point ran since
    assert spread_wanted([100.0, 106.0], [50.0, 60.0, 110.0], 110.0, False, 2,
                         same_point=False) == "answer"
    assert spread_wanted([100.0, 100.0 + SETTLE_SPAN_S], [], None, False, 2,
                         same_point=True) is None
    # on a steady path one run more at most: repeats of one point in one phase spread nothing
    assert spread_wanted([100.0, 103.0, 106.0], [], None, False, 2, same_point=True) is None


def test_a_varying_path_wants_more_runs_spread_over_a_longer_span():
    two = [0.0, 45.0]
    assert spread_wanted(two, [], None, True, 2, same_point=True) == "answer"
    spread = [0.0, 20.0, 40.0, VARYING_SPAN_S + 1]
    assert len(spread) == VARYING_RUNS
    assert spread_wanted(spread, [], None, True, 2, same_point=True) is None
    close = [0.0, 5.0, 10.0, 15.0]  # enough runs, one phase
    assert spread_wanted(close, [], None, True, 2, same_point=True) == "answer"
    # bounded: no more than VARYING_MAX_RUNS at the answer's point
    capped = [5.0 * k for k in range(VARYING_MAX_RUNS)]
    assert spread_wanted(capped, [], None, True, 2, same_point=True) is None


def test_the_statement_says_the_path_varies_and_by_how_much():
    v = Variation(varies=True, between_rel_sd=0.3, between_dof=25, expected_rel_sd=0.05,
                  runs=4, span_s=72.0, run_low_mbps=5.1, run_high_mbps=11.2,
                  p10_mbps=4.6, p90_mbps=12.4)
    text = confidence_statement(3.0, 12.5, 0.9, pm_settled=True, cc_settled=True, variation=v)
    assert "the path varies: 4.60-12.4 Mbit/s second to second" in text
    assert "runs 5.10-11.2 Mbit/s over 72 s" in text
    quiet = confidence_statement(3.0, 12.5, 0.9, pm_settled=True, cc_settled=True)
    assert "varies" not in quiet
