"""The buffer sweep of a stream campaign in adaptive mode: the next paced probe from
`algorithm.stream_sweep.decide_stream_sweep` over what was measured (every arm at the grid's top,
the leader's buffers by bisection, repeats only where the decision is open), until the decision
is settled or the budget (or the grid's probe count) is spent. The decision is stored with the
campaign and *is* its answer at finish (`flows.answers.decided.decided_stream`).

A point whose paced probe stalled does not carry the stream: that one probe decides it and it is
never asked again. A probe that *failed* (the tool, or the check of its subflow set: a backup
subflow that took a few KiB of reinjected data) says nothing about the stream; the point is asked
again, and only after `MAX_FAILED_TRIES` failures and no ok probe does it count as not carrying
(one rejected probe at PCDC's reference point took the best arm out of the sweep)."""

from __future__ import annotations

from dataclasses import replace

from models import NO_EXCLUSION, MeasurementPhase
from probes.vocabulary import PCDC

from ....algorithm import adaptive
from ....algorithm.arm import Arm
from ....algorithm.objective import objective_of
from ....algorithm.stream_sweep import decide_stream_sweep
from ....state import STOP_BUDGET, STOP_SETTLED, state_of
from ....state.selected import merged_into_fullmesh, sweep_arms
from ...answers.decided import stream_note
from ...answers.stream_answer import CONFIDENCE, NO_PROBE, measured_runs, stalled
from .. import budget
from ..plan import ProbeStep
from .base import Context, PhaseVerdict, probe
from .fitting import buffer_samples, fit

name = budget.SWEEP  # the phase is the budget's "sweep"; its probes MeasurementPhase.SWEEP
#: failed probes of one point, none ok, after which it counts as not carrying (the selection's
#: `MAX_FAILURES`): a fault that repeats there is the point's, not chance
MAX_FAILED_TRIES = 3


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    objective = objective_of(campaign.objective)
    arms = [Arm(*a) for a in sweep_arms(campaign)]
    tried = buffer_samples(ctx).tried
    runs = measured_runs(ctx.session, campaign, campaign.delta).runs
    for (pm, cc, bs), count in failed_probes(ctx).items():  # failed each try: not carrying
        if count >= MAX_FAILED_TRIES and not runs.get(Arm(pm, cc), {}).get(bs):
            runs.setdefault(Arm(pm, cc), {})[bs] = [NO_PROBE]
    decision = decide_stream_sweep(
        arms, campaign.buffer_grid_mib, runs, rate_mbps=objective.rate_mbps,
        delta=campaign.delta, max_loss=objective.loss_allowed, confidence=CONFIDENCE,
        min_runs=max(1, min(campaign.runs, adaptive.MIN_RUNS)))
    spent = (state_of(campaign).budget.exhausted
             or sum(tried.values()) >= budget.adaptive_sweep_cap(campaign))
    if not decision.settled and not spent and decision.probes:
        wanted = decision.probes[0]  # the rule lists the most pressing first
        run = tried.get((wanted.pm, wanted.cc, wanted.bs_mib), 0) + 1
        return probe(_step(ctx, wanted, run), budget.asked(
            campaign, state_of(campaign), budget.SWEEP, len(decision.probes)))
    stop = STOP_SETTLED if decision.settled else STOP_BUDGET
    # The curves only (the answer is the decision); first, as the fit records its unfitted
    # arms in the campaign's state, which the state returned below then carries.
    fit(ctx, required=False)
    state = replace(state_of(campaign), sweep_decision=stream_note(
        decision, stop, pcdc_as_fullmesh=tuple(sorted(merged_into_fullmesh(campaign)))))
    return PhaseVerdict(state=budget.settled(campaign, state))


def failed_probes(ctx: Context) -> dict[tuple[str, str, float], int]:
    """(PM, CC, buffer) -> how many of its paced probes failed (no figures recorded); a
    stalled one counts as every try (it is never retried into the same stall)."""
    out: dict[tuple[str, str, float], int] = {}
    for m in ctx.runs(MeasurementPhase.SWEEP):
        if m.status != "ok" or stalled(m):
            key = (m.pm, m.cc, float(m.bs_mib))
            out[key] = out.get(key, 0) + (MAX_FAILED_TRIES if stalled(m) else 1)
    return out


def _step(ctx: Context, wanted: adaptive.WantedProbe, run: int) -> ProbeStep:
    """The paced probe of `wanted`: PCDC on the CC's selected subflows."""
    subsets = ctx.subsets()
    allowed = None
    if wanted.pm == PCDC and set(subsets[wanted.cc]) != set(ctx.subflows):
        allowed = tuple(subsets[wanted.cc])
    return ProbeStep(MeasurementPhase.SWEEP, wanted.pm, wanted.cc, wanted.bs_mib, run,
                     NO_EXCLUSION, allowed)
