"""The buffer sweep of grid mode (Eq. 7): every (PM, CC, buffer, run), PCDC on SP* of its CC;
the grid grows while the best arm still climbs at its top; then the fit, and one more run of the
whole sweep while the quality gate fails and the budget allows.

A stream objective's sweep does neither: its paced probes' goodput is flat at the stream's rate
wherever it is carried, so a goodput plateau or a goodput fit's gate says nothing about the
stream, and their extra buffers and rounds would double its cost for nothing. Its answer is the
frame delay at the grid's points (`flows.answers.stream_answer`). A point whose paced probe
stalled (the connection took no data: it ended at its duration plus a margin, its frames
lost) cannot carry the stream: it is decided by that one probe, its other runs are not made
(they would run into the same stall)."""

from __future__ import annotations

from dataclasses import replace
from statistics import fmean

from models import MeasurementPhase

from ....algorithm.objective import objective_of
from ....algorithm.sweep import plateau_extension
from ....state import CampaignState, state_of
from ...answers.stream_answer import stalled
from .. import budget
from ..plan import buffer_steps
from .base import FAILED, Context, PhaseVerdict, probe
from .fitting import MAX_GRID_EXTENSIONS, buffer_samples, fit

name = budget.SWEEP  # the phase is the budget's "sweep"; its probes MeasurementPhase.SWEEP
MAX_EXTRA_ROUNDS_WITHOUT_BUDGET = 2


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    goodput_decides = not objective_of(campaign.objective).is_stream
    # The state this pass decides (the grid's growth, its flag, the extra rounds, their
    # replans): returned on the verdict, never written here. The plan's columns the steps
    # follow (the grid, the runs) are still written on the campaign row as they change.
    state = start = state_of(campaign)
    while True:
        if not state.budget.exhausted:
            done, subsets = ctx.done(), ctx.subsets()
            decided = set() if goodput_decides else _stalled_points(ctx)
            for step in buffer_steps(
                campaign.pms, campaign.measured_ccs, campaign.buffer_grid_mib, campaign.runs,
                subsets, ctx.subflows, campaign.seed,
            ):
                if step.key not in done and (step.pm, step.cc, float(step.bs_mib)) not in decided:
                    return probe(step, None if state is start else state)
            if goodput_decides:
                state, grew = _extend_grid(ctx, state)
                if grew:
                    continue
        fits = fit(ctx)
        # the fit records its unfitted arms in the campaign's state itself: carried over
        state = replace(state, unfitted_arms=state_of(campaign).unfitted_arms)
        if fits is None:
            return replace(FAILED, state=state)
        if goodput_decides and not all(f.gate_passed for f in fits):
            more = _another_round(ctx, state)
            if more is not None:
                state = more
                continue
        return PhaseVerdict(state=state)


def _stalled_points(ctx: Context) -> set[tuple[str, str, float]]:
    """(PM, CC, buffer) of the points a paced probe stalled at: they cannot carry the stream."""
    return {(m.pm, m.cc, float(m.bs_mib))
            for m in ctx.runs(MeasurementPhase.SWEEP)
            if stalled(m)}


def _extend_grid(ctx: Context, state: CampaignState) -> tuple[CampaignState, bool]:
    """One more buffer above the grid, for every arm and run, while the best arm is still
    climbing at the largest buffer (the plateau T* is read off would be a slope), up to
    `MAX_GRID_EXTENSIONS` points and within the budget; flagged when the grid had to stop
    below the plateau. Returns `state` with what it decided, and whether the grid grew."""
    campaign = ctx.campaign
    samples = buffer_samples(ctx).samples
    arm_means = {arm: {bs: fmean(v) for bs, v in per.items()} for arm, per in samples.items()}
    more = plateau_extension(campaign.buffer_grid_mib, arm_means, campaign.delta)
    if more is None:
        return state, False
    probes = len(campaign.pms) * len(campaign.measured_ccs) * campaign.runs
    extended = tuple(state.grid_extended or ())
    if len(extended) >= MAX_GRID_EXTENSIONS or not budget.affords(campaign, probes):
        return replace(state, grid_below_plateau=max(campaign.buffer_grid_mib)), False
    campaign.buffer_grid_mib = sorted([*campaign.buffer_grid_mib, more])  # the plan's column
    ctx.session.flush()
    return budget.replanned(campaign, replace(state, grid_extended=(*extended, more))), True


def _another_round(ctx: Context, state: CampaignState) -> CampaignState | None:
    """The gate failed: `state` with one more run of the whole buffer sweep, replanned, if the
    budget allows it (None: it does not)."""
    campaign = ctx.campaign
    if state.budget.exhausted:
        return None
    if budget.left_s(campaign) is None:
        if state.budget.extra_rounds >= MAX_EXTRA_ROUNDS_WITHOUT_BUDGET:
            return None
    else:
        round_probes = (
            len(campaign.pms) * len(campaign.measured_ccs) * len(campaign.buffer_grid_mib)
        )
        if not budget.affords(campaign, round_probes):
            return None
    campaign.runs += 1  # the plan's column the steps follow
    return budget.replanned(
        campaign, state.with_budget(extra_rounds=state.budget.extra_rounds + 1))
