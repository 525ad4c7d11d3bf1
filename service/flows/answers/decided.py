"""An adaptive campaign's answer as its sweep decided it.

The sweep (`phases.adaptive_sweep`) settles OPM, OCC, OBS and OTP with `adaptive.decide` and
stores that decision with the campaign; at finish the decision *is* the answer, stored as the
campaign's recommendation with its promise and confidence. Nothing solves it a second time:
`solve_campaign` answers grid campaigns and "what if delta (or the buffer range) were ..."
questions, and an adaptive campaign's per-arm table is still read off its measured means.

Only the campaign's own sweep decides: a campaign stopped by its budget decided nothing, and one
imported from a bundle is answered again here (`bundle_import`), so a decision it carries is
never taken as its answer.

A stream campaign's adaptive sweep (`phases.stream_sweep`) stores its `StreamDecision` the same
way (`stream_note`, with `"objective": "stream"`), and the stream answer is that decision
(`decided_stream`), settled or stopped by the budget (it then says it is not settled). Both are
the algorithm's own decisions, read back as they were stored (`state.sweep_outcome`).

Every read of the stored decision is in this module.
"""

from __future__ import annotations

from dataclasses import replace

from models import Campaign

from ...algorithm.solver import SolverAnswer
from ...algorithm.stream_choice import StreamDecision
from ...state import BulkSweepOutcome, StreamSweepOutcome, state_of
from ...store import campaigns as campaign_store
from .answer import Promise

DECIDED = "adaptive decision"  # provenance["answer_from"] of an answer the sweep decided
SOLVED = "solve"  # ... of an answer solved from the curves (grid mode, a what-if question)


def sweep_decision(campaign: Campaign) -> BulkSweepOutcome | None:
    """The settled outcome the campaign's own sweep stored; None for a grid campaign, a sweep
    stopped by its budget and a campaign imported from a bundle."""
    state = state_of(campaign)
    outcome = state.sweep_decision
    if (campaign.mode != "adaptive" or state.imported is not None
            or not isinstance(outcome, BulkSweepOutcome) or not outcome.answers):
        return None
    return outcome


def decided_question(campaign: Campaign, delta: float, bs_min: float | None,
                     bs_max: float | None) -> BulkSweepOutcome | None:
    """The sweep's outcome when (delta, bounds) is the question it decided: the campaign's
    delta on the buffers it measured (bounds left out, or those); else None (a what-if)."""
    outcome = sweep_decision(campaign)
    if outcome is None or delta != campaign.delta:
        return None
    lo, hi = campaign_store.buffer_range(campaign)
    if bs_min not in (None, lo) or bs_max not in (None, hi):
        return None
    return outcome


def decided_solution(solution: SolverAnswer, outcome: BulkSweepOutcome) -> SolverAnswer:
    """`solution` (the measured means' per-arm table) with the decision's answer: its OPM, OCC,
    OBS, OTP, T* and target."""
    decision = outcome.decision
    t_star = decision.t_star_mbps
    otp = decision.otp_mbps
    return replace(
        solution,
        opm=decision.opm, occ=decision.occ, obs_mib=decision.obs_mib,
        otp_mbps=solution.otp_mbps if otp is None else otp,
        tp_max_mbps=solution.tp_max_mbps if t_star is None else t_star,
        target_mbps=decision.target_mbps or solution.target_mbps,
        measured_obs_mib=decision.obs_mib,  # the decision reads OBS off a measured buffer
    )


def differs_from_solve(solution: SolverAnswer, outcome: BulkSweepOutcome) -> dict | None:
    """What the measured means' solve reads where it is not the decision (None: the same)."""
    decision = outcome.decision
    said = (decision.opm, decision.occ, decision.obs_mib)
    if (solution.opm, solution.occ, solution.obs_mib) == said:
        return None
    return {"opm": solution.opm, "occ": solution.occ, "obs_mib": solution.obs_mib,
            "otp_mbps": solution.otp_mbps}


def promise_of(outcome: BulkSweepOutcome) -> Promise | None:
    """The decision's promise: where a fresh probe of the answer should land, its statement and
    the confidence it is given at."""
    promise = outcome.promise
    if promise is None:
        return None
    return Promise(statement=outcome.statement, low_mbps=promise.low_mbps,
                   high_mbps=promise.high_mbps, of=promise.of,
                   confidence=outcome.decision.confidence,
                   variation=None if outcome.variation is None else outcome.variation.to_dict())


def promise_if_same(campaign: Campaign, solution: SolverAnswer) -> Promise | None:
    """A what-if answer of an adaptive campaign carries the decision's promise only when it
    names the decision's configuration (OPM and OCC)."""
    outcome = state_of(campaign).sweep_decision
    if (not isinstance(outcome, BulkSweepOutcome)
            or (outcome.decision.opm, outcome.decision.occ) != (solution.opm, solution.occ)):
        return None
    return promise_of(outcome)


def stream_note(decision: StreamDecision, stop: str, **more) -> StreamSweepOutcome:
    """A stream sweep's decision as the campaign stores it (`sweep_decision`); `more`: the
    outcome's fields the decision itself does not carry (`pcdc_as_fullmesh`)."""
    return StreamSweepOutcome(decision=decision, stop=stop, **more)


def decided_stream(campaign: Campaign) -> StreamDecision | None:
    """The decision a stream campaign's own adaptive sweep stored; None for a grid campaign and
    one imported from a bundle (answered from its measurements)."""
    state = state_of(campaign)
    stored = state.sweep_decision
    if (campaign.mode != "adaptive" or state.imported is not None
            or not isinstance(stored, StreamSweepOutcome)):
        return None
    return stored.decision
