"""A warm recalibration's phase (`flows.scheduling.warm`): the probes checking the last answer, then
the verdict. Confirmed finishes the campaign on the last calibration; drifted is done, and the full
campaign goes on (its probes added to the plan)."""

from __future__ import annotations

from dataclasses import replace

from ....store import campaigns as campaign_store
from ...scheduling import warm
from .. import budget
from .base import DONE, ENOUGH, Context, PhaseVerdict, probe

name = "warm"


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    promises = warm.pending_checks(ctx.session, campaign=campaign)
    if promises is None:
        return DONE
    steps = [step for check in promises for step in check.steps()]
    checked = campaign.run_state.warm
    if checked.probes != len(steps):
        campaign_store.update_state(campaign, warm=replace(checked, probes=len(steps)))
    budget.replan(campaign)
    done = ctx.done()
    for step in steps:
        if step.key not in done and budget.affords(campaign):
            return probe(step)
    if warm.judge(ctx.session, campaign=campaign, checks_=promises):
        return ENOUGH
    budget.replan(campaign)
    ctx.session.flush()
    return DONE
