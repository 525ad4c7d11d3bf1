"""The buffer sweep of adaptive mode: the next probe from `algorithm.adaptive.decide` over what
was measured, the grid extended upwards while the best arm still climbs at its top; when the
decision is settled or the budget (or the grid plan's probe count) is spent: the fit. The answer
is read off the measured buffers (`campaign_answer.solve_campaign`)."""

from __future__ import annotations

from models import NO_EXCLUSION
from probes.vocabulary import PCDC

from ...algorithm import adaptive
from ...algorithm.sweep import plateau_extension
from ...store import campaigns as campaign_store
from .. import budget
from ..plan import ProbeStep
from .base import DONE, FINAL, Context, Outcome, probe
from .fitting import MAX_GRID_EXTENSIONS, buffer_samples, fit, grid_extensions, grow_grid

name = "sweep"


def advance(ctx: Context) -> Outcome:
    campaign = ctx.campaign
    arms = [(pm, cc) for pm in campaign.pms for cc in campaign.active_ccs]
    samples, tried = buffer_samples(ctx)
    cap = budget.grid_sweep_probes(campaign)  # never more than the grid
    decision = None
    while not campaign.budget_exhausted and sum(tried.values()) < cap:
        if _climb(ctx, arms, samples):  # the grid grew: the new top first
            continue
        decision = adaptive.decide(arms, campaign.buffer_grid_mib, samples, campaign.delta)
        if decision.settled:
            break
        budget.ask(campaign, "sweep", len(decision.probes) + 1)
        choice = decision.probes[0]
        subsets = ctx.subsets()
        allowed = None
        if choice.pm == PCDC and set(subsets[choice.cc]) != set(ctx.subflows):
            allowed = tuple(subsets[choice.cc])
        run = tried.get((choice.pm, choice.cc, choice.bs_mib), 0) + 1
        return probe(ProbeStep(
            "buffer", choice.pm, choice.cc, choice.bs_mib, run, NO_EXCLUSION, allowed
        ))
    stop = "settled" if decision is not None and decision.settled else "budget"
    campaign_store.add_note(campaign, "adaptive", {
        "stop": stop, **({} if decision is None else {
            k: getattr(decision, k) for k in (
                "opm", "occ", "obs_mib", "otp_mbps", "otp_half_width_mbps", "t_star_mbps",
                "target_mbps", "survivors", "eliminated")}),
        "confidence": adaptive.DEFAULT_CONFIDENCE,
    })
    budget.settle(campaign)
    if fit(ctx) is None:
        return FINAL
    return DONE


def _climb(ctx: Context, arms, samples) -> bool:
    """The grid extended (True) when the leader at the top still climbs there by more than
    delta (`sweep.plateau_extension`), up to `MAX_GRID_EXTENSIONS` points."""
    campaign = ctx.campaign
    means = adaptive.top_pair_means(arms, campaign.buffer_grid_mib, samples)
    if means is None or len(grid_extensions(ctx)) >= MAX_GRID_EXTENSIONS:
        return False
    more = plateau_extension(campaign.buffer_grid_mib, means, campaign.delta)
    if more is None:
        return False
    grow_grid(ctx, more)
    budget.replan(campaign)
    return True
