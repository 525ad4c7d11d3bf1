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
(`decided_stream`), settled or stopped by the budget (it then says it is not settled).

Every read of the stored decision is in this module.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace

from models import BulkSweepDecision, Campaign, StreamSweepDecision

from ...algorithm.alternative import Alternative
from ...algorithm.solver import SolverAnswer
from ...algorithm.stream_choice import StreamDecision
from ...store import campaigns as campaign_store
from .answer import Promise

DECIDED = "adaptive decision"  # provenance["answer_from"] of an answer the sweep decided
SOLVED = "solve"  # ... of an answer solved from the curves (grid mode, a what-if question)


def sweep_decision(campaign: Campaign) -> BulkSweepDecision | None:
    """The settled decision the campaign's own sweep stored; None for a grid campaign, a sweep
    stopped by its budget and a campaign imported from a bundle."""
    state = campaign.run_state
    decision = state.sweep_decision
    if (campaign.mode != "adaptive" or state.imported is not None
            or not isinstance(decision, BulkSweepDecision) or not decision.answers):
        return None
    return decision


def decided_question(campaign: Campaign, delta: float, bs_min: float | None,
                     bs_max: float | None) -> BulkSweepDecision | None:
    """The sweep's decision when (delta, bounds) is the question it decided: the campaign's
    delta on the buffers it measured (bounds left out, or those); else None (a what-if)."""
    decision = sweep_decision(campaign)
    if decision is None or delta != campaign.delta:
        return None
    lo, hi = campaign_store.buffer_range(campaign)
    if bs_min not in (None, lo) or bs_max not in (None, hi):
        return None
    return decision


def decided_solution(solution: SolverAnswer, decision: BulkSweepDecision) -> SolverAnswer:
    """`solution` (the measured means' per-arm table) with the decision's answer: its OPM, OCC,
    OBS, OTP, T* and target."""
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


def differs_from_solve(solution: SolverAnswer, decision: BulkSweepDecision) -> dict | None:
    """What the measured means' solve reads where it is not the decision (None: the same)."""
    said = (decision.opm, decision.occ, decision.obs_mib)
    if (solution.opm, solution.occ, solution.obs_mib) == said:
        return None
    return {"opm": solution.opm, "occ": solution.occ, "obs_mib": solution.obs_mib,
            "otp_mbps": solution.otp_mbps}


def promise_of(decision: BulkSweepDecision) -> Promise | None:
    """The decision's promise: where a fresh probe of the answer should land, its statement and
    the confidence it is given at."""
    promise = decision.promise
    if promise is None:
        return None
    return Promise(statement=decision.statement, low_mbps=promise.low_mbps,
                   high_mbps=promise.high_mbps, of=promise.of,
                   confidence=decision.confidence,
                   variation=None if decision.variation is None else decision.variation.to_dict())


def promise_if_same(campaign: Campaign, solution: SolverAnswer) -> Promise | None:
    """A what-if answer of an adaptive campaign carries the decision's promise only when it
    names the decision's configuration (OPM and OCC)."""
    decision = campaign.run_state.sweep_decision
    if (not isinstance(decision, BulkSweepDecision)
            or (decision.opm, decision.occ) != (solution.opm, solution.occ)):
        return None
    return promise_of(decision)


def stream_note(decision: StreamDecision, stop: str, **more) -> StreamSweepDecision:
    """A stream sweep's decision as the campaign stores it (`sweep_decision`); `more`: the
    stored fields the decision itself does not carry (`pcdc_as_fullmesh`)."""
    fields = asdict(decision)
    fields.pop("probes")
    # JSON has no infinity: stored (and so read back) as None
    fields = {k: None if isinstance(v, float) and not math.isfinite(v) else v
              for k, v in fields.items()}
    stored = StreamSweepDecision.from_dict({"stop": stop, **fields})
    return replace(stored, present=None, **more)


def decided_stream(campaign: Campaign) -> StreamDecision | None:
    """The decision a stream campaign's own adaptive sweep stored; None for a grid campaign and
    one imported from a bundle (answered from its measurements)."""
    state = campaign.run_state
    stored = state.sweep_decision
    if (campaign.mode != "adaptive" or state.imported is not None
            or not isinstance(stored, StreamSweepDecision)):
        return None
    fields = stored.decision_fields()
    fields["alternatives"] = [Alternative(a.label, a.relative, a.differs_in)
                              for a in stored.alternatives]
    fields["carrying"] = list(stored.carrying)
    fields["not_carrying"] = dict(stored.not_carrying)
    known = StreamDecision.__dataclass_fields__
    return StreamDecision(**{k: v for k, v in fields.items() if k in known})
