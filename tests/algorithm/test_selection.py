"""Subflow selection by measured value: forward selection, repeats only where they can settle a
decision, the budget, sharing across CCs, and the comparison with the paper's leave-one-out Ω."""

from collections import defaultdict

import pytest

from service.algorithm.impact import impact_from_omegas
from service.algorithm.selection import (
    MAX_FAILURES,
    Budget,
    SelectionState,
    next_probes,
    result,
    subset_label,
)
from service.algorithm.selection_omega import compare_with_omega

from .selection_sim import SRL_HU, drive, srl_hu

ALL = frozenset(SRL_HU)
TP0_SRL_HU = {ALL: [0.32, 3.38]}  # the same all-subflows probe twice at ~300 ms RTT


def test_srl_hu_selects_one_fast_subflow_where_every_combination_is_worse():
    res, state, probes = drive(SRL_HU, srl_hu, samples=TP0_SRL_HU, cc="bbr")
    assert res.subset == ("U-C",)
    assert res.complete and res.reason == "selected"
    assert [s.decision for s in res.path] == ["start", "stop"]
    start, stop = res.path
    assert start.rival == ("K-C",)  # the runner-up alone, 0.7 % behind: a tie
    assert not start.settled
    assert stop.subflow == "K-C" and stop.rival == ("K-C", "U-C")
    assert stop.gain.high < 0 and stop.settled  # adding the best other subflow costs ~23 %
    assert stop.gain.fraction == pytest.approx(14.46 / 18.80 - 1, abs=0.02)
    # K-C alone cannot be told apart: said, so the subset is not settled
    assert res.within_reach[0].label == "K-C alone"
    assert res.within_reach[0].relative == pytest.approx(18.66 / 18.80 - 1, abs=0.01)
    assert not res.settled
    assert res.unusable == (("P-CU",),)  # its probe failed MAX_FAILURES times
    assert res.standby_subflows[0] == "K-C"
    # 8 alone x 2 (P-CU's 3 failures) + 7 pairs with U-C x 2
    assert probes == 7 * 2 + MAX_FAILURES + 7 * 2
    assert all(len(v) <= state.max_runs for v in state.samples.values())


def test_srl_hu_omega_keeps_all_eight_and_the_comparison_says_so():
    res, state, _ = drive(SRL_HU, srl_hu, samples=TP0_SRL_HU, cc="bbr")
    omega = impact_from_omegas("bbr", {n: 0.01 for n in SRL_HU}, SRL_HU)  # every Ω >= 0
    cmp = compare_with_omega(res, omega.subset, state)
    assert not cmp.agree
    assert cmp.kept_by_omega_only == tuple(n for n in SRL_HU if n != "U-C")
    assert cmp.kept_by_selection_only == ()
    assert cmp.measured_gain is not None and cmp.measured_gain.fraction > 5
    text = cmp.statement(SRL_HU)
    assert text.startswith("Ω keeps all subflows; the measured selection keeps U-C alone")
    assert "drops K-C" in text and "against Ω's subset" in text
    assert "measured x" in text  # a factor, not thousands of percent


def test_omega_and_selection_agreeing_say_so():
    names = ("A-X", "B-X")
    res, state, _ = drive(names, lambda s: 10.0 * len(s), cc="cubic")
    cmp = compare_with_omega(res, names, state)
    assert cmp.agree and cmp.measured_gain is None
    assert cmp.statement(names) == "Ω and the measured selection agree: all subflows."
    with pytest.raises(ValueError, match="not one of the subflows"):
        compare_with_omega(res, ["Z-Z"])


def test_every_useful_path_is_added_and_all_subflows_selected():
    rates = {"A-X": 10.0, "B-X": 8.0, "C-X": 5.0, "D-X": 3.0}
    res, _, probes = drive(tuple(rates), lambda s: sum(rates[n] for n in s))
    assert set(res.subset) == set(rates)
    assert [s.decision for s in res.path] == ["start", "add", "add", "add"]
    assert [s.subflow for s in res.path[1:]] == ["B-X", "C-X", "D-X"]
    assert all(s.gain.low > 0 for s in res.path[1:])
    assert res.settled and not res.within_reach
    assert probes <= 2 * (4 + 3 + 2 + 1) + 4  # forward selection plus a few repeats


def test_a_thin_uplink_beside_a_fast_one_is_left_out():
    # the thin uplink's packets hold the fast one's back (head-of-line blocking)
    rates = {frozenset({"F-X"}): 20.0, frozenset({"T-X"}): 0.5, frozenset({"F-X", "T-X"}): 12.0}
    res, _, probes = drive(("F-X", "T-X"), rates.get)
    assert res.subset == ("F-X",)
    assert res.path[-1].decision == "stop" and res.path[-1].settled
    assert probes == 2 * 3
    assert res.standby_subflows == ("T-X",)


def test_a_thin_uplink_that_adds_its_share_is_kept():
    rates = {frozenset({"F-X"}): 20.0, frozenset({"T-X"}): 2.0, frozenset({"F-X", "T-X"}): 21.9}
    res, _, _ = drive(("F-X", "T-X"), rates.get, spread=0.005)
    assert res.subset == ("F-X", "T-X")
    assert res.path[-1].decision == "add" and res.path[-1].gain.low > 0


def test_a_positive_gain_inside_the_noise_gets_repeats_a_negative_one_does_not():
    fast, both = frozenset({"F-X"}), frozenset({"F-X", "T-X"})
    base = {fast: [19.8, 20.2], frozenset({"T-X"}): [1.0, 1.01]}
    # +3.5 % with a 1 % wobble: not settled by 2 runs, settled by 4 at this spread: one more
    state = SelectionState(("F-X", "T-X"), {**base, both: [20.5, 20.9]})
    gain = result(state).path[-1].gain
    assert gain.fraction > 0 > gain.low
    assert next_probes(state) == [fast]
    assert not result(state).complete
    # +2.5 %: even 4 runs each would not settle it at this spread: no repeat, a stop
    state = SelectionState(("F-X", "T-X"), {**base, both: [20.3, 20.7]})
    assert next_probes(state) == []
    assert result(state).path[-1].decision == "stop"
    # -3.5 %: more runs could only confirm the stop
    state = SelectionState(("F-X", "T-X"), {**base, both: [19.1, 19.5]})
    assert next_probes(state) == []
    res = result(state)
    assert res.subset == ("F-X",) and res.path[-1].decision == "stop"
    assert not res.path[-1].settled and res.within_reach  # said, not hidden


def test_repeats_stop_at_max_runs():
    noisy = {frozenset({"F-X"}): 20.0, frozenset({"T-X"}): 2.0, frozenset({"F-X", "T-X"}): 20.4}
    res, state, _ = drive(("F-X", "T-X"), noisy.get, spread=0.08, max_runs=4)
    assert all(len(v) <= 4 for v in state.samples.values())
    assert res.complete


def test_all_subflows_beating_the_greedy_path_wins():
    # each pair is worse than A alone, all three together better (they only help together)
    alone = {"A-X": 10.0, "B-X": 4.0, "C-X": 4.0}

    def rate(subset):
        return {1: alone[min(subset)], 2: 9.0, 3: 15.0}[len(subset)]

    names = tuple(alone)
    res, _, _ = drive(names, rate, samples={frozenset(names): [14.8, 15.2]})
    assert res.subset == names
    assert [s.decision for s in res.path] == ["start", "stop", "all"]
    assert res.path[-1].settled


@pytest.mark.parametrize("budget", [0, 1, 5, 12])
def test_the_budget_caps_the_probes(budget):
    res, _, probes = drive(SRL_HU, srl_hu, budget_probes=budget)
    assert probes <= budget
    assert not res.complete and res.reason == "budget"
    assert len(res.subset) >= 1  # still an answer: the best so far, or every subflow


def test_a_budget_in_probe_seconds():
    state = SelectionState(SRL_HU, budget=Budget(probe_seconds=30, seconds_per_probe=6))
    assert len(next_probes(state)) == 5
    with pytest.raises(ValueError, match="seconds_per_probe"):
        Budget(probe_seconds=30)


def test_first_probes_are_each_subflow_alone_interleaved():
    state = SelectionState(SRL_HU)
    wanted = next_probes(state)
    assert wanted == [frozenset({n}) for n in SRL_HU] * 2
    assert result(state).reason == "measuring"


def test_a_ccs_selection_is_shared_when_its_runs_agree():
    ref, _, ref_probes = drive(SRL_HU, srl_hu, samples=TP0_SRL_HU, cc="bbr")
    res, _, probes = drive(SRL_HU, lambda s: None if srl_hu(s) is None else 0.9 * srl_hu(s),
                           samples=TP0_SRL_HU, cc="cubic", reference=ref)
    assert res.shared_from == "bbr" and res.subset == ref.subset
    assert [s.decision for s in res.path] == [s.decision for s in ref.path]
    assert res.path[0].estimate.mean_mbps == pytest.approx(0.9 * 18.80, rel=0.02)  # its own runs
    # U-C, K-C, U-C+K-C once each: the subsets the reference's decisions rest on
    assert probes == 3
    assert probes < ref_probes / 8


def test_a_cc_whose_runs_overturn_a_decision_selects_on_its_own():
    ref, _, _ = drive(SRL_HU, srl_hu, samples=TP0_SRL_HU, cc="bbr")

    def reno(s):  # under reno, U-C and K-C together add up
        return 30.0 if s == frozenset({"U-C", "K-C"}) else srl_hu(s)

    res, state, _ = drive(SRL_HU, reno, samples=TP0_SRL_HU, cc="reno", reference=ref)
    assert res.shared_from is None
    assert [s.decision for s in res.contradicted] == ["stop"]
    assert res.subset == ("K-C", "U-C")
    # it starts again from the reference's start and runner-up alone, the two its check
    # measured: the six thin subflows are not measured alone a second time
    alone = {next(iter(x)) for x in state.samples if len(x) == 1}
    assert alone == {"U-C", "K-C"}


def test_nothing_usable_falls_back_to_every_subflow():
    res, _, probes = drive(("A-X", "B-X"), lambda s: None)
    assert res.reason == "nothing_usable" and res.subset == ("A-X", "B-X")
    assert res.estimate is None and not res.settled
    assert probes == 2 * MAX_FAILURES  # each alone failed: nothing to build on


def test_a_rebuilt_state_gives_the_same_answer_in_any_order():
    _, state, _ = drive(SRL_HU, srl_hu, samples=TP0_SRL_HU)
    backwards = SelectionState(SRL_HU, dict(reversed(list(state.samples.items()))),
                               dict(state.failures))
    assert result(backwards) == result(state)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"subflows": []}, "subflows: empty"),
    ({"subflows": ["A-X", "A-X"]}, "repeat"),
    ({"samples": {frozenset({"Z-Z"}): [1.0]}}, "not one of the subflows"),
    ({"samples": {frozenset(): [1.0]}}, "empty subset"),
    ({"samples": {frozenset({"A-X"}): [-1.0]}}, "finite and >= 0"),
    ({"samples": {frozenset({"A-X"}): [float("nan")]}}, "finite and >= 0"),
    ({"confidence": 1.0}, "confidence"),
    ({"min_runs": 3, "max_runs": 2}, "runs"),
    ({"min_gain": -0.1}, "min_gain"),
    ({"failures": {frozenset({"A-X"}): -1}}, "failures"),
    ({"failures": {frozenset({"Q-X"}): 1}}, "not one of the subflows"),
])
def test_bad_input_is_refused(kwargs, match):
    args = {"subflows": ["A-X", "B-X"], **kwargs}
    with pytest.raises(ValueError, match=match):
        SelectionState(**args)


def test_subset_labels():
    assert subset_label(frozenset({"U-C"}), SRL_HU) == "U-C alone"
    assert subset_label(("U-C", "K-C"), SRL_HU) == "K-C+U-C"
    assert subset_label(SRL_HU, SRL_HU) == "all subflows"


def test_subsets_given_as_tuples_of_names_merge_and_a_bare_name_is_refused():
    state = SelectionState(("A-X", "B-X"), defaultdict(list, {
        frozenset({"A-X"}): [1.0], ("A-X",): [1.2], ("B-X", "A-X"): [3.0]}))
    assert state.samples[frozenset({"A-X"})] == (1.0, 1.2)
    assert state.samples[frozenset({"A-X", "B-X"})] == (3.0,)
    with pytest.raises(ValueError, match="a set of subflow names"):
        SelectionState(("A-X", "B-X"), {"A-X": [1.0]})


def test_a_measured_subset_passed_in_that_beats_the_path_wins():
    # B+C only help together, and only without A: forward selection from A cannot reach them,
    # but the PCDC arm measured Ω's SP* {B, C} at this buffer
    alone = {"A-X": 10.0, "B-X": 6.0, "C-X": 6.0}

    def rate(subset):
        return alone[min(subset)] if len(subset) == 1 else 5.0

    names = tuple(alone)
    omega_sp = frozenset({"B-X", "C-X"})
    res, state, _ = drive(names, rate, samples={omega_sp: [14.8, 15.2, 15.0]})
    assert res.subset == ("B-X", "C-X")
    assert [s.decision for s in res.path] == ["start", "stop", "measured"]
    assert compare_with_omega(res, omega_sp, state).agree


def test_of_two_subflows_alone_that_tie_the_path_starts_on_the_quicker():
    """shared.yaml: two paths through one 8 Mbit/s uplink read its rate alike alone (D-T 7.471,
    D-U 7.469 Mbit/s), and both together no more. The one with the shorter RTT carries that rate
    from a smaller buffer (PCDC on D-T needed 0.10 MiB where D-U needs 0.04)."""
    rates = {frozenset({"D-U"}): 7.469, frozenset({"D-T"}): 7.471,
             frozenset({"D-U", "D-T"}): 7.47}
    settings = {"negligible": 0.035, "min_gain": 0.035}
    res, _, _ = drive(("D-U", "D-T"), rates.get, spread=0.002, **settings)
    assert res.subset == ("D-T",)  # no RTTs known: the higher mean
    res, _, _ = drive(("D-U", "D-T"), rates.get, spread=0.002,
                      rtts_ms={"D-U": 30.0, "D-T": 80.0}, **settings)
    assert res.subset == ("D-U",)
    assert res.path[0].rival == ("D-T",)
    # a clearly better subflow alone still starts the path, however long its RTT
    rates[frozenset({"D-T"})] = 9.0
    res, _, _ = drive(("D-U", "D-T"), rates.get, spread=0.002,
                      rtts_ms={"D-U": 30.0, "D-T": 80.0}, **settings)
    assert res.subset == ("D-T",)


def test_the_start_does_not_change_as_the_pooled_spread_widens():
    """SRL-HU's K-C (18.864, 300 ms) and U-C (18.81, 280 ms) alone, each run reading the same:
    within delta/2, so U-C, the quicker, starts the path from the first decision on, and every
    pair measured adds to U-C, however wide the pairs' erratic runs make the pooled spread (a
    start that flipped halfway measured a second path: 31 probes of 9 s)."""
    rates = {frozenset({"K-C"}): 18.864, frozenset({"U-C"}): 18.81,
             frozenset({"K-CU"}): 3.8, frozenset({"K-C", "U-C"}): 18.58,
             frozenset({"U-C", "K-CU"}): 21.9, frozenset({"K-C", "K-CU"}): 22.5,
             frozenset({"K-C", "U-C", "K-CU"}): 20.8}
    calls = defaultdict(int)

    def goodput(subset):  # singles steady, anything larger +-25 % run to run
        calls[subset] += 1
        swing = 1.0 if len(subset) == 1 else (1.25 if calls[subset] % 2 else 0.75)
        return rates[subset] * swing

    res, state, _ = drive(("K-C", "U-C", "K-CU"), goodput, spread=0.0, negligible=0.035,
                          min_gain=0.035, rtts_ms={"K-C": 300.0, "U-C": 280.0, "K-CU": 260.0})
    assert res.path[0].subset == ("U-C",)
    pairs = [x for x in state.samples if len(x) == 2]
    assert pairs and all("U-C" in x for x in pairs)
