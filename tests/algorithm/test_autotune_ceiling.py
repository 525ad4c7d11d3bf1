"""The autotuning ceiling's sweep points, cost and decision (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithm import autotune_ceiling as ac


def test_candidates_are_twice_the_grid_within_the_top():
    assert ac.candidate_ceilings([0.25, 0.5, 1.0, 2.0]) == [0.5, 1.0, 2.0, 4.0]
    assert ac.candidate_ceilings([0.25, 0.5, 1.0, 40.0], top_mib=64.0) == [0.5, 1.0, 2.0, 64.0]
    assert ac.candidate_ceilings([100.0], top_mib=64.0) == [64.0]
    assert len(ac.candidate_ceilings([0.1 * i for i in range(1, 20)], top_mib=64.0)) == 8
    many = ac.candidate_ceilings([0.1 * i for i in range(1, 20)])
    assert len(many) == ac.MAX_CANDIDATES and many[-1] == pytest.approx(3.8)


def test_the_cost_is_stated_in_probes_and_seconds():
    cost = ac.sweep_cost([1.0, 2.0, 4.0, 64.0], probe_s=8.0)
    # the top, then a bisection over the rest: at most 1 + log2(4) points of 2 runs
    assert cost == {"ceilings_mib": [1.0, 2.0, 4.0, 64.0], "runs": 2, "probes": 6,
                    "probe_seconds": 48.0}
    assert ac.planned_probes(0) == 0 and ac.planned_probes(1) == 2 and ac.planned_probes(8) == 8


def _bisect(candidates, rate, delta=0.1):
    """Run the sweep against `rate(ceiling)` (a noiseless path): the points it probed, in
    order, and its decision."""
    samples, tried, order = {}, {}, []
    while (c := ac.next_ceiling(candidates, samples, tried, delta)) is not None:
        samples.setdefault(c, []).append(rate(c))
        tried[c] = tried.get(c, 0) + 1
        if not order or order[-1] != c:
            order.append(c)
    return order, ac.decide(samples, delta)


def test_the_sweep_bisects_from_the_top_down_to_the_smallest_reaching_ceiling():
    candidates = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    order, got = _bisect(candidates, lambda c: min(10.0, 3.0 * c))  # plateau from 3.33 MiB
    assert order[0] == 64.0 and len(order) <= 1 + 3
    assert got.autotune_max_mib == 4.0 and got.otp_mbps == 10.0
    # never more probes than the plan states
    order, got = _bisect(candidates, lambda c: 10.0)
    assert got.autotune_max_mib == 0.5 and 2 * len(order) <= ac.planned_probes(len(candidates))


def test_a_ceiling_whose_probes_all_failed_does_not_reach():
    samples = {64.0: [10.0, 10.0]}
    tried = {64.0: 2, 1.0: 2}
    assert ac.next_ceiling([1.0, 2.0, 64.0], samples, tried, 0.1) == 2.0


def test_the_smallest_ceiling_whose_lower_bound_reaches_the_target():
    samples = {0.5: [4.0, 4.2], 1.0: [9.0, 9.4], 2.0: [9.8, 10.0], 4.0: [10.0, 10.1]}
    got = ac.decide(samples, delta=0.1)
    assert got.best_ceiling_mib == 4.0 and got.best_mbps == pytest.approx(10.05)
    assert got.target_mbps == pytest.approx(0.9 * 10.05)
    # 1.0's mean 9.2 clears 9.045 but its lower bound (pooled spread) does not: 2.0 it is
    assert got.autotune_max_mib == 2.0 and got.otp_mbps == pytest.approx(9.9)
    low, high = got.interval_mbps
    assert low < 9.9 < high


def test_a_clear_plateau_takes_the_first_ceiling_on_it():
    samples = {1.0: [5.0, 5.01], 2.0: [10.0, 10.02], 4.0: [10.01, 10.0]}
    assert ac.decide(samples, delta=0.05).autotune_max_mib == 2.0


def test_nothing_measured_decides_nothing_and_delta_is_checked():
    assert ac.decide({1.0: []}, delta=0.1) is None
    with pytest.raises(ValueError):
        ac.decide({1.0: [1.0]}, delta=1.5)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0]),
                       st.lists(st.floats(0.1, 100.0), min_size=1, max_size=4), min_size=1),
       st.floats(0.01, 0.5))
def test_the_answer_is_within_delta_of_the_best_and_never_above_it(samples, delta):
    got = ac.decide(samples, delta)
    assert got.autotune_max_mib <= got.best_ceiling_mib
    assert got.otp_mbps >= (1 - delta) * got.best_mbps - 1e-9
    assert got.interval_mbps[0] <= got.otp_mbps <= got.interval_mbps[1]
