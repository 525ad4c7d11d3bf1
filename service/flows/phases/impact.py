"""The impact phase (Eq. 5): per CC and run TP_0 and one TP_i per excluded subflow; then Omega
with its confidence and SP* per CC. A CC with an Omega whose sign is not settled gets another
run while more runs could settle it, it has fewer than `impact_max_runs` and the budget (less the
buffer sweep's share) allows; a CC whose runs all failed is dropped."""

from __future__ import annotations

from ...algorithm.impact_confidence import ConfidentImpact, subflows_needing_runs
from ...store import campaigns as campaign_store
from ...store import results
from .. import budget
from ..derive import impact_from_runs
from ..plan import impact_steps
from .base import DONE, Context, Outcome, probe

name = "impact"


def advance(ctx: Context) -> Outcome:
    campaign = ctx.campaign
    while True:
        done = ctx.done()
        for step in impact_steps(campaign.active_ccs, budget.impact_runs(campaign), ctx.subflows):
            if step.key not in done:
                return probe(step)
        stored = results.impact_results(ctx.session, campaign_id=campaign.id)
        if set(campaign.active_ccs) <= {r.cc for r in stored}:
            return DONE
        derived = impact_from_runs(
            ctx.session, campaign_id=campaign.id, subflows=ctx.subflows,
            confidence=ctx.settings.impact_confidence,
        )
        if not _more_runs(ctx, derived):
            return _store(ctx, derived)


def _more_runs(ctx: Context, derived: list[ConfidentImpact]) -> bool:
    """One more impact run for every CC whose Omega's sign could still be settled by one (not in
    adaptive mode, where the measured selection decides SP*)."""
    campaign, settings = ctx.campaign, ctx.settings
    if campaign.mode == "adaptive":
        return False
    runs = budget.impact_runs(campaign)
    per_run = 1 + len(ctx.subflows)
    # The buffer sweep's share of the budget is not the impact phase's.
    reserve_s = budget.grid_sweep_probes(campaign) * budget.probe_cost_s(campaign)
    extra = dict(campaign.extra_impact_runs or {})
    added = 0
    for result in derived:
        if runs[result.cc] >= settings.impact_max_runs:
            continue
        hopeful = subflows_needing_runs(result, settings.impact_max_runs)
        if not any(total is not None for total in hopeful.values()):
            continue
        if not budget.affords(campaign, (added + 1) * per_run, reserve_s=reserve_s):
            continue
        extra[result.cc] = extra.get(result.cc, 0) + 1
        added += 1
    if not added:
        return False
    campaign.extra_impact_runs = extra
    budget.replan(campaign)
    return True


def _store(ctx: Context, derived_: list[ConfidentImpact]) -> Outcome:
    """Omega and SP* per CC; what stayed unsettled is noted (and flagged on the answer)."""
    campaign = ctx.campaign
    derived = {r.cc: r for r in derived_}
    campaign_store.add_note(
        campaign, "unsettled_omegas", {r.cc: r.unsettled for r in derived_ if r.unsettled}
    )
    dropped = dict(campaign.dropped_ccs or {})
    for cc in campaign.active_ccs:
        if cc not in derived:
            dropped[cc] = "impact phase: no usable TP_0 and TP_i runs (all failed)"
    kept = [cc for cc in campaign.active_ccs if cc in derived]
    results.store_impact(ctx.session, campaign_id=campaign.id,
                         results=[derived[cc] for cc in kept])
    campaign.active_ccs, campaign.dropped_ccs = kept, dropped
    if not kept:
        return ctx.fail("impact phase: no congestion control has usable runs")
    budget.replan(campaign)
    ctx.session.flush()
    return DONE
