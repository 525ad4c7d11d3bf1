"""benchmarks/coupling.py judges RFC 6356's goals (the suite runs each control briefly, the
benchmark judges the goals over rounds): on the medians of its rounds, against the bounds."""

from __future__ import annotations

from benchmarks.coupling import HARM_BOUND, judge


def _rounds(goal: str, key: str, *values: float) -> dict[str, list[dict]]:
    return {goal: [{key: v} for v in values]}


def test_a_goal_is_judged_on_the_median_of_its_rounds():
    res = {"lia": {**_rounds("harm", "ratio", 0.8, 1.9, 1.0),  # one far-out round
                   **_rounds("improve", "ratio", 0.95, 0.92, 0.5),
                   **_rounds("balance", "frac_congested", 0.3, 0.3, 0.3)},
           "reno": {**_rounds("harm", "ratio", 1.5, 1.4, 1.2),
                    **_rounds("balance", "frac_congested", 0.35, 0.4, 0.36)}}
    verdicts = {(g, cc): (round(v, 3), held)
                for g, cc, v, _b, held in judge(res, ["lia", "reno"], ["harm", "improve",
                                                                       "balance"])}
    assert verdicts[("do no harm: MPTCP / TCP", "lia")] == (1.0, True)
    assert verdicts[("improve: MPTCP / best path", "lia")] == (0.92, True)
    assert verdicts[("reno takes more than lia", "lia")] == (0.2, True)
    assert verdicts[("balance: share / reno's", "lia")] == (round(0.3 / 0.36, 3), True)


def test_a_goal_that_does_not_hold_is_said():
    res = {"wvegas": {**_rounds("harm", "ratio", 1.7, 1.8, 1.0),
                      **_rounds("balance", "frac_congested", 0.5, 0.5, 0.5)},
           "vegas": _rounds("harm", "ratio", 1.0, 1.0, 1.0),
           "reno": _rounds("balance", "frac_congested", 0.4, 0.4, 0.4)}
    held = {(g, cc): h for g, cc, _v, _b, h in judge(res, ["wvegas", "vegas", "reno"],
                                                      ["harm", "balance"])}
    assert HARM_BOUND["wvegas"] < 1.7
    assert held == {("do no harm: MPTCP / TCP", "wvegas"): False,
                    ("vegas takes more than wvegas", "wvegas"): False,
                    ("balance: share / reno's", "wvegas"): False}
