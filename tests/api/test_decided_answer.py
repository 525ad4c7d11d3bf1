"""Which question an adaptive sweep's stored decision answers (`flows.answers.decided`): its own
delta on the buffers it measured, for a campaign whose sweep settled here; any other question is
solved."""

from __future__ import annotations

from models import Campaign
from service.algorithm.solver import SolverAnswer
from service.flows.answers.decided import (
    decided_question,
    decided_solution,
    differs_from_solve,
    promise_of,
    sweep_decision,
)
from service.state import BulkSweepOutcome, CampaignState

GRID = [0.1, 0.2, 0.4, 0.8]
DECISION = {
    "stop": "settled", "opm": "PCDC", "occ": "cubic", "obs_mib": 0.2, "otp_mbps": 9.9,
    "t_star_mbps": 10.05, "target_mbps": 9.35, "confidence": 0.9,
    "statement": "Expect 9.8-10.0 Mbit/s ...",
    "promise": {"low_mbps": 9.8, "high_mbps": 10.0, "of": "one fresh probe"},
}
TYPED = BulkSweepOutcome.from_dict(DECISION)


def _campaign(mode: str = "adaptive", **state) -> Campaign:
    return Campaign(mode=mode, delta=0.07, buffer_grid_mib=GRID,
                    run_state_json=CampaignState(sweep_decision=DECISION, **state).to_dict())


def _solution(opm: str, occ: str, obs: float, otp: float) -> SolverAnswer:
    return SolverAnswer(opm=opm, occ=occ, obs_mib=obs, otp_mbps=otp, tp_max_mbps=10.0,
                        tp_max_bs_mib=0.8, tp_max_pm="FullMesh", tp_max_cc="cubic",
                        target_mbps=9.3, delta=0.07, bs_min_mib=0.1, bs_max_mib=0.8, arms=[])


def test_the_decision_answers_the_question_it_decided_only():
    c = _campaign()
    assert sweep_decision(c) == TYPED and sweep_decision(c).to_dict() == DECISION
    for lo, hi in ((None, None), (0.1, 0.8), (None, 0.8)):
        assert decided_question(c, 0.07, lo, hi) == TYPED
    assert decided_question(c, 0.1, None, None) is None  # what if delta were 0.1
    assert decided_question(c, 0.07, 0.2, None) is None  # another buffer range
    assert decided_question(c, 0.07, None, 0.4) is None


def test_no_decision_without_a_settled_sweep_of_this_database():
    assert sweep_decision(_campaign(mode="grid")) is None
    assert sweep_decision(_campaign(imported={"from": {"campaign_id": 3}})) is None
    stopped = Campaign(mode="adaptive", delta=0.07, buffer_grid_mib=GRID,
                       run_state_json={"sweep_decision": {"stop": "budget", "opm": None}})
    assert sweep_decision(stopped) is None


def test_the_stored_answer_is_the_decision_even_where_the_solve_reads_otherwise():
    solved = _solution("FullMesh", "cubic", 0.4, 10.0)
    answer = decided_solution(solved, TYPED)
    assert (answer.opm, answer.occ, answer.obs_mib, answer.otp_mbps, answer.tp_max_mbps,
            answer.target_mbps) == ("PCDC", "cubic", 0.2, 9.9, 10.05, 9.35)
    assert differs_from_solve(solved, TYPED) == {
        "opm": "FullMesh", "occ": "cubic", "obs_mib": 0.4, "otp_mbps": 10.0}
    assert differs_from_solve(_solution("PCDC", "cubic", 0.2, 9.9), TYPED) is None
    promise = promise_of(TYPED)
    assert (promise.low_mbps, promise.high_mbps, promise.confidence) == (9.8, 10.0, 0.9)
