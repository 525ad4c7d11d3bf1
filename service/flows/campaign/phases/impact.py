"""The impact phase (Eq. 5): per CC and run TP_0 and one TP_i per excluded subflow; then Omega
with its confidence and SP* per CC. A CC with an Omega whose sign is not settled gets another
run while more runs could settle it, it has fewer than `impact_max_runs` and the budget (less the
buffer sweep's share) allows; a CC whose runs all failed is dropped. In adaptive mode Ω is
measured under one CC only (`_advance_adaptive`)."""

from __future__ import annotations

from dataclasses import replace
from statistics import fmean

from models import NO_EXCLUSION, MeasurementPhase

from ....algorithm.impact_confidence import ConfidentImpact, subflows_needing_runs
from ....state import CampaignState, OmegaCCs, state_of
from ....store import results
from .. import budget
from ..derive import impact_from_runs
from ..plan import impact_steps
from .base import DONE, Context, PhaseVerdict, probe

name = "impact"


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    if campaign.mode == "adaptive":
        return _advance_adaptive(ctx)
    # The state this pass decides (the extra runs): returned on the verdict, never written here.
    state, changed = state_of(campaign), False
    while True:
        done = ctx.done()
        runs = budget.impact_runs(campaign, state)
        for step in impact_steps(campaign.active_ccs, runs, ctx.subflows):
            if step.key not in done:
                return probe(step, state if changed else None)
        stored = results.impact_results(ctx.session, campaign_id=campaign.id)
        if set(campaign.active_ccs) <= {r.cc for r in stored}:
            return PhaseVerdict(state=state) if changed else DONE
        derived = impact_from_runs(
            ctx.session, campaign_id=campaign.id, subflows=ctx.subflows,
            confidence=ctx.settings.impact_confidence,
        )
        more = _more_runs(ctx, derived, state)
        if more is None:
            return _store(ctx, derived, state)
        state, changed = more, True


def _advance_adaptive(ctx: Context) -> PhaseVerdict:
    """Adaptive mode, where Ω decides nothing (the measured selection does): TP_0 under every
    CC (the selection's all-subflows check, and the choice of its reference CC), then the TP_i
    under the reference only, so Ω is computed, stored and shown for that CC. The other CCs'
    leave-one-out probes would cost len(subflows) probes each and inform no decision."""
    campaign = ctx.campaign
    if state_of(campaign).omega_ccs is not None:
        return DONE
    done = ctx.done()
    runs = budget.impact_runs(campaign)
    steps = impact_steps(campaign.active_ccs, runs, ctx.subflows)
    for step in steps:
        if step.excluded_subflow == NO_EXCLUSION and step.key not in done:
            return probe(step)
    tp0 = _tp0_means(ctx, campaign.active_ccs)
    # the selection's reference too (`phases.selection`): the CC whose TP_0 gave most
    reference = min(tp0, key=lambda cc: (-tp0[cc], campaign.active_ccs.index(cc)), default=None)
    if reference is not None:
        for step in impact_steps([reference], runs, ctx.subflows):
            if step.key not in done:
                return probe(step)
    derived = impact_from_runs(
        ctx.session, campaign_id=campaign.id, subflows=ctx.subflows,
        confidence=ctx.settings.impact_confidence,
    )
    state = replace(state_of(campaign), omega_ccs=OmegaCCs(  # the CCs Ω was measured under
        ccs=tuple(r.cc for r in derived),
        why="adaptive mode: Ω under the reference CC (the best TP_0) only; the measured "
            "selection decides SP*",
    ))
    return _store(ctx, derived, state, usable=set(tp0))


def _tp0_means(ctx: Context, ccs: list[str]) -> dict[str, float]:
    """The mean of the ok TP_0 runs per CC (a CC whose TP_0 failed has none)."""
    values: dict[str, list[float]] = {}
    for m in ctx.ok_runs(MeasurementPhase.IMPACT):
        if m.excluded_subflow == NO_EXCLUSION and m.mean_goodput_mbps and m.cc in ccs:
            values.setdefault(m.cc, []).append(m.mean_goodput_mbps)
    return {cc: fmean(v) for cc, v in values.items()}


def _more_runs(ctx: Context, derived: list[ConfidentImpact],
               state: CampaignState) -> CampaignState | None:
    """`state` with one more impact run for every CC whose Omega's sign could still be settled
    by one, replanned (not in adaptive mode, where the measured selection decides SP*); None:
    no CC gets one."""
    campaign, settings = ctx.campaign, ctx.settings
    if campaign.mode == "adaptive":
        return None
    runs = budget.impact_runs(campaign, state)
    per_run = 1 + len(ctx.subflows)
    # The buffer sweep's share of the budget is not the impact phase's.
    reserve_s = budget.sweep_reserve_s(campaign)
    extra = dict(state.budget.extra_impact_runs)
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
        return None
    return budget.replanned(campaign, state.with_budget(extra_impact_runs=extra))


def _store(ctx: Context, derived_: list[ConfidentImpact], state: CampaignState,
           usable: set[str] | None = None) -> PhaseVerdict:
    """Omega and SP* per CC; what stayed unsettled is noted (and flagged on the answer), on
    `state`, returned replanned. A CC is kept when it has Omega, or (adaptive mode) a usable
    TP_0 (`usable`)."""
    campaign = ctx.campaign
    derived = {r.cc: r for r in derived_}
    state = replace(
        state, unsettled_omegas={r.cc: r.unsettled for r in derived_ if r.unsettled}
    )
    usable = set(derived) if usable is None else usable | set(derived)
    dropped = dict(campaign.dropped_ccs or {})
    for cc in campaign.active_ccs:
        if cc not in usable:
            dropped[cc] = "impact phase: no usable TP_0 and TP_i runs (all failed)"
    kept = [cc for cc in campaign.active_ccs if cc in usable]
    results.store_impact(ctx.session, campaign_id=campaign.id,
                         results=[derived[cc] for cc in kept if cc in derived])
    campaign.active_ccs, campaign.dropped_ccs = kept, dropped
    if not kept:
        return replace(ctx.fail("impact phase: no congestion control has usable runs"),
                       state=state)
    ctx.session.flush()
    return PhaseVerdict(state=budget.replanned(campaign, state))
