"""Issue 10 item 1: Omega over several runs with a t confidence interval; SP* on settled signs."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithm.impact_confidence import (
    ImpactRun,
    impact_with_confidence,
    omega_estimate,
    runs_to_settle,
    subflows_needing_runs,
)

SP = ["A-X", "B-X", "C-X"]


def runs_from(omegas_per_run: list[dict[str, float]], tp0: float = 10.0) -> list[ImpactRun]:
    """TP_i / TP_0 = 1 - Omega in each run; TP_0 given as a series, TP_i as means."""
    return [
        ImpactRun(tp0_mbps=[tp0, tp0], excluded_mbps={n: tp0 * (1 - o) for n, o in run.items()})
        for run in omegas_per_run
    ]


def test_mean_and_t_interval_by_hand():
    est = omega_estimate("A-X", [0.2, 0.4, 0.3])
    # mean 0.3, s = 0.1, t_{0.975, 2} = 4.302653: half-width 0.248414
    assert est.mean == pytest.approx(0.3)
    assert est.ci_low == pytest.approx(0.3 - 0.248414, abs=1e-6)
    assert est.ci_high == pytest.approx(0.3 + 0.248414, abs=1e-6)
    assert est.settled and est.runs == 3
    wide = omega_estimate("A-X", [0.2, 0.4, 0.3], confidence=0.999)
    assert wide.ci_low < 0 < wide.ci_high and not wide.settled


def test_sp_star_from_the_means_with_unsettled_listed():
    runs = runs_from(
        [
            {"A-X": 0.30, "B-X": -0.20, "C-X": 0.05},
            {"A-X": 0.32, "B-X": -0.22, "C-X": -0.04},
            {"A-X": 0.28, "B-X": -0.18, "C-X": 0.02},
        ]
    )
    result = impact_with_confidence("cubic", runs, SP)
    assert result.omegas["A-X"] == pytest.approx(0.30)
    assert result.subset == ["A-X", "C-X"]  # Eq. 6 on the means: C-X's mean is +0.01
    assert result.unsettled == ["C-X"]
    assert result.estimates["B-X"].settled and result.estimates["B-X"].mean < 0
    assert not result.same_as_fullmesh
    needs = subflows_needing_runs(result, max_runs=9)
    assert list(needs) == ["C-X"]
    assert needs["C-X"] is None  # mean 0.01 with s ~0.047: nine runs cannot settle it
    legacy = result.to_impact_result()
    assert legacy.subset == ["A-X", "C-X"] and legacy.standby == ["B-X"]
    assert legacy.omegas["C-X"] == pytest.approx(0.01) and not legacy.same_as_fullmesh


def test_one_run_is_unsettled_not_a_crash():
    result = impact_with_confidence("reno", runs_from([{"A-X": 0.3, "B-X": -0.1}]), SP)
    assert result.unsettled == ["A-X", "B-X"]
    est = result.estimates["A-X"]
    assert est.ci_low is None and est.ci_high is None and "one run" in est.reason
    assert result.unmeasured == ["C-X"]
    assert subflows_needing_runs(result, max_runs=5) == {"A-X": 2, "B-X": 2}
    assert subflows_needing_runs(result, max_runs=1) == {"A-X": None, "B-X": None}


def test_runs_to_settle_solves_the_t_condition():
    est = omega_estimate("A-X", [0.1, -0.02, 0.12, 0.02])  # mean 0.055, s ~0.0660
    assert not est.settled
    n = runs_to_settle(est, max_runs=20)
    s = math.sqrt(sum((v - 0.055) ** 2 for v in [0.1, -0.02, 0.12, 0.02]) / 3)
    from scipy import stats

    assert stats.t.ppf(0.975, n - 1) * s / math.sqrt(n) < 0.055
    assert stats.t.ppf(0.975, n - 2) * s / math.sqrt(n - 1) >= 0.055
    assert runs_to_settle(est, max_runs=n - 1) is None
    assert runs_to_settle(omega_estimate("A-X", [0.3, 0.31]), max_runs=9) == 0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="not a subflow"):
        impact_with_confidence("cubic", runs_from([{"Z-Z": 0.1}]), SP)
    with pytest.raises(ValueError, match="confidence"):
        omega_estimate("A-X", [0.1, 0.2], confidence=1.0)
    with pytest.raises(ValueError, match=r"runs\[0\]\.A-X"):
        impact_with_confidence("cubic", [ImpactRun([0.0], {"A-X": 1.0})], SP)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(-2, 1), min_size=2, max_size=12), level=st.floats(0.5, 0.99))
def test_interval_contains_the_mean_and_settled_means_ci_excludes_zero(values, level):
    est = omega_estimate("A-X", values, confidence=level)
    assert est.ci_low <= est.mean + 1e-12 and est.mean - 1e-12 <= est.ci_high
    assert est.settled == (est.ci_low > 0 or est.ci_high < 0)
    # A higher level never settles what a lower one left open.
    if not est.settled:
        assert not omega_estimate("A-X", values, confidence=min(0.999, level + 0.005)).settled
