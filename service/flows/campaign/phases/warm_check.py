"""A warm recalibration's phase (`flows.campaign.warm`): the probes checking the last answer, then
the verdict. Confirmed finishes the campaign on the last calibration; drifted is done, and the full
campaign goes on (its probes added to the plan)."""

from __future__ import annotations

from dataclasses import replace

from ....state import state_of
from ....store import campaigns as campaign_store
from .. import budget, warm
from .base import DONE, ENOUGH, Context, PhaseVerdict, probe

name = "warm"


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    promises = warm.pending_checks(ctx.session, campaign=campaign)
    if promises is None:
        return DONE
    steps = [step for check in promises for step in check.steps()]
    state = state_of(campaign)
    if state.warm.probes != len(steps):
        state = replace(state, warm=replace(state.warm, probes=len(steps)))
    state = budget.replanned(campaign, state)
    done = ctx.done()
    for step in steps:
        # the check's probe count and the plan change no budget figure `affords` reads
        if step.key not in done and budget.affords(campaign):
            return probe(step, state)
    # The judgement reads and records the warm check in the campaign's state: saved first.
    campaign_store.save_state(campaign, state)
    if warm.judge(ctx.session, campaign=campaign, checks_=promises):
        return ENOUGH
    budget.replan(campaign)
    ctx.session.flush()
    return DONE
