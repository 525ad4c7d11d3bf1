"""A calibration campaign, step by step: what comes next, asked of its phases in order.

The phases (`flows.campaign.phases`): the CCs both sites offer -> a warm recalibration's checks ->
the impact phase (Omega, SP*) -> in adaptive mode, and for a stream, the subflow selection (SP* by
measured value; a stream's by p99 frame delay) ->
the buffer sweep (grid or adaptive, with its fit). Each answers a
probe to run, done (the next phase's turn), failed (it failed the campaign) or finish (nothing
more to measure). A new phase is one module in `phases_for`'s list.

Every phase re-reads the campaign from the database and is idempotent, so the same steps serve
every executor (`flows.campaign.executor`) and a campaign resumes wherever it stopped: a step is
done when a measurement with its key exists (status ok, or failed after retries). When nothing is
left to measure, the executor calls `flows.campaign.finish.finish_campaign`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from models import Campaign

from ...algorithm.objective import objective_of
from ...settings import Settings
from ...state import state_of
from ...store import campaigns as campaign_store
from . import budget
from .phases import (
    adaptive_sweep,
    autotune_sweep,
    ccs,
    grid_sweep,
    impact,
    selection,
    stream_sweep,
    warm_check,
)
from .phases.base import Context, Phase
from .plan import ProbeStep
from .probing import Prober


@dataclass(frozen=True)
class NextStep:
    """What a campaign needs next: a probe, or finishing (`finish`), or nothing (it is final)."""

    step: ProbeStep | None = None
    finish: bool = False


FINAL = NextStep()  # nothing: the campaign is final (done or failed)
FINISH = NextStep(finish=True)  # finish it now (a phase said `ENOUGH`, or every phase is done)


def phases_for(campaign: Campaign) -> Sequence[Phase]:
    """The campaign's phases, in the order they run: the paper's procedure (grid: SP* from Ω,
    every buffer), or the adaptive one (SP* by measured selection, buffers chosen as measured)."""
    if campaign.mode == "adaptive":
        sweep = stream_sweep if objective_of(campaign.objective).is_stream else adaptive_sweep
        if sweep is stream_sweep:
            return (ccs, warm_check, impact, selection, sweep)
        # the autotuning ceiling, once the sweep decided (`phases.autotune_sweep`)
        return (ccs, warm_check, impact, selection, sweep, autotune_sweep)
    if objective_of(campaign.objective).is_stream:  # PCDC's subflows chosen by frame delay
        return (ccs, warm_check, impact, selection, grid_sweep)
    return (ccs, warm_check, impact, grid_sweep)


def next_step(
    session: Session, *, campaign_id: int, prober: Prober, settings: Settings
) -> NextStep:
    """Do every piece of work that needs no probe, and say what the campaign needs next.

    A probe the budget cannot cover (one a phase committed to is covered: `PhaseVerdict`)
    ends the campaign in the impact phase (it cannot be
    answered without one); later, it marks the budget exhausted and the phases are asked again
    (they then answer from what was measured)."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if campaign_store.is_final(campaign):
        return FINAL
    if campaign.state == "queued":
        campaign_store.set_state(session, campaign_id=campaign.id, state="running")
    while True:
        ctx = Context(session=session, campaign=campaign, settings=settings, prober=prober)
        for phase in phases_for(campaign):
            verdict = phase.advance(ctx)
            if verdict.state is not None:  # the one place a phase's returned state is saved
                campaign_store.save_state(campaign, verdict.state)
                session.flush()
            if verdict.failed:
                return FINAL
            if verdict.enough:
                return FINISH
            if verdict.step is None:
                continue
            if verdict.committed or budget.affords(campaign):
                return NextStep(step=verdict.step)
            if verdict.step.phase == "impact" or state_of(campaign).budget.exhausted:
                _fail(session, campaign, f"probe-seconds budget spent before the {phase.name} "
                      f"phase ended ({state_of(campaign).budget.used_s:.0f} s used)")
                return FINAL
            budget.exhaust(campaign)
            session.flush()
            break
        else:
            return FINISH


def _fail(session: Session, campaign: Campaign, why: str) -> None:
    campaign_store.set_state(session, campaign_id=campaign.id, state="failed", error=why)


def fail_campaign(session: Session, *, campaign_id: int, why: str) -> None:
    """Stop a campaign that cannot go on (no testbed for its sites, ...), saying why."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    if not campaign_store.is_final(campaign):
        if campaign.state == "queued":
            campaign_store.set_state(session, campaign_id=campaign.id, state="running")
        _fail(session, campaign, why)
