"""A campaign's probe budget: what each phase plans to probe, what it spent, and what is left.

Every count the campaign reports comes from here, by one formula each:
- `planned`: per budget phase (warm, impact, selection, sweep, autotune) the probes the
  campaign's columns imply now (the runs, the grid, the CCs still measured, the extra impact
  runs), never fewer than the phase spent or asked for; `replan` writes their sum and both
  the planned and the spent probe-seconds per phase into the campaign's state
  (`CampaignState.budget`, shown by GET /campaigns and kept with the answer's provenance);
- `charge`: a stored probe's cost, the one place the progress counters move;
- `affords`: whether the probe-seconds budget (None: unbounded) covers more probes, and
  `sweep_reserve_s` the one share an earlier phase leaves to the sweep, `autotune_reserve_s`
  what the sweep leaves to the autotune phase;
- `progress` and `remaining_s`: what the API, the dashboard and the fleet policy show and order by.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from models import MEASUREMENT_PHASES, Campaign, MeasurementPhase
from probes.testbed.lifecycle import BUFFER_MAX

from ...algorithm import adaptive
from ...algorithm.autotune_ceiling import CEILING_RUNS, candidate_ceilings, planned_probes
from ...algorithm.objective import objective_of
from ...state import CampaignState, Tally, put_state, state_of
from ...state.selected import sweep_arms
from ...store import campaigns as campaign_store
from .plan import selection_probes

# The budget phases, by `MeasurementPhase.budget_phase`: the sweep's probes are stored with
# phase "buffer" and charged to "sweep".
PHASES = tuple(p.budget_phase for p in (MeasurementPhase.WARM, MeasurementPhase.IMPACT,
                                         MeasurementPhase.SELECTION, MeasurementPhase.SWEEP,
                                         MeasurementPhase.AUTOTUNE))
AUTOTUNE = MeasurementPhase.AUTOTUNE.budget_phase
SWEEP = MeasurementPhase.SWEEP.budget_phase


def impact_runs(campaign: Campaign, state: CampaignState | None = None) -> dict[str, int]:
    """Impact runs per CC: the plan's, plus those added while an Omega's sign was unsettled
    (by `state`, else the campaign's)."""
    extra = (state_of(campaign) if state is None else state).budget.extra_impact_runs
    base = campaign.impact_runs if campaign.impact_runs is not None else campaign.runs
    return {cc: base + extra.get(cc, 0) for cc in campaign.measured_ccs}


def grid_sweep_probes(campaign: Campaign) -> int:
    """Every (PM, CC, buffer, run) of the buffer sweep (Eq. 7); also the adaptive sweep's cap."""
    ccs = campaign.measured_ccs
    return len(campaign.pms) * len(ccs) * len(campaign.buffer_grid_mib) * campaign.runs


def adaptive_sweep_cap(campaign: Campaign) -> int:
    """The most an adaptive sweep may probe: the grid with at least the runs an interval needs,
    and the repeats that make T* hold."""
    runs = max(campaign.runs, adaptive.MIN_RUNS)
    grid = len(sweep_arms(campaign, campaign.measured_ccs)) * len(campaign.buffer_grid_mib) * runs
    return grid + adaptive.T_STAR_MAX_RUNS


def autotune_ceilings(grid_mib: list[float]) -> list[float]:
    """The autotuning ceilings the autotune phase sweeps: 2 x each grid buffer, up to the
    testbed namespaces' own ceiling, the reference (`algorithm.autotune_ceiling`)."""
    return candidate_ceilings(sorted(set(grid_mib)), top_mib=BUFFER_MAX / 2**20)


def autotune_probes(grid_mib: list[float]) -> int:
    """What the autotune phase costs at most, in probes (its seconds: at `probe_cost_s` each):
    the top ceiling and a bisection over the others."""
    return planned_probes(len(autotune_ceilings(grid_mib)), CEILING_RUNS)


def adaptive_sweep_estimate(campaign: Campaign) -> int:
    """An adaptive sweep's estimate: per arm the top of the grid, then a bisection."""
    arms = len(sweep_arms(campaign, campaign.measured_ccs))
    steps = 1 + math.ceil(math.log2(len(campaign.buffer_grid_mib)))
    return arms * adaptive.MIN_RUNS * steps


def selection_estimate(campaign: Campaign, n_subflows: int) -> int:
    """A measured selection's estimate (`plan.selection_probes`)."""
    return selection_probes(n_subflows, len(campaign.measured_ccs))


def planned(campaign: Campaign, n_subflows: int,
            state: CampaignState | None = None) -> dict[str, int]:
    """Probes per budget phase, by the campaign's columns now and `state` (else the campaign's;
    see the module's docstring)."""
    state = state_of(campaign) if state is None else state
    spent = {phase: state.budget.spent_probes(phase) for phase in state.budget.spent}
    if state.budget.settled:
        return {phase: spent.get(phase, 0) for phase in PHASES}
    warm = state.warm
    plan = dict.fromkeys(PHASES, 0)
    plan["warm"] = 0 if warm is None else warm.probes
    if warm is None or warm.verdict == "warm_drifted":  # checks only, unless they drifted
        runs = impact_runs(campaign, state)
        plan["impact"] = (
            # adaptive: TP_0 under every CC, the TP_i under the reference CC only
            sum(runs.values()) + max(runs.values(), default=0) * n_subflows
            if campaign.mode == "adaptive" else sum(runs.values()) * (1 + n_subflows)
        )
        plan[SWEEP] = (
            adaptive_sweep_estimate(campaign) if campaign.mode == "adaptive"
            else grid_sweep_probes(campaign)
        )
        if campaign.mode == "adaptive":
            plan["selection"] = selection_estimate(campaign, n_subflows)
            if not objective_of(campaign.objective).is_stream:
                # the autotuning ceiling's sweep (`phases.autotune_sweep`)
                plan[AUTOTUNE] = autotune_probes(campaign.buffer_grid_mib or [])
    asked = state.budget.asked
    return {
        phase: max(count, spent.get(phase, 0), asked.get(phase, 0))
        for phase, count in plan.items()
    }


def replanned(campaign: Campaign, state: CampaignState) -> CampaignState:
    """`state` with the planned total and the per-phase plan its budget implies (pure: the
    campaign is only read, for its plan's columns)."""
    counts = planned(campaign, len(campaign.topology.subflows), state)
    cost = probe_cost_s(campaign, state)
    return state.with_budget(
        planned=sum(counts.values()),
        phase_plan={phase: Tally(n, n * cost) for phase, n in counts.items() if n},
    )


def asked(campaign: Campaign, state: CampaignState, phase: str, probes: int) -> CampaignState:
    """`state` replanned with `phase`, which chooses its probes as it goes, needing `probes`
    more than it has spent (pure)."""
    b = state.budget
    return replanned(campaign, state.with_budget(
        asked={**b.asked, phase: b.spent_probes(phase) + probes}))


def settled(campaign: Campaign, state: CampaignState) -> CampaignState:
    """`state` replanned with nothing more to probe: every phase's plan is what it spent
    (progress 100 %; pure)."""
    return replanned(campaign, state.with_budget(settled=True))


def replan(campaign: Campaign) -> int:
    """Write the planned total and the per-phase plan into the budget; returns the total."""
    put_state(campaign, replanned(campaign, state_of(campaign)))
    return state_of(campaign).budget.planned


def ask(campaign: Campaign, phase: str, probes: int) -> None:
    """A phase that chooses its probes as it goes needs `probes` more than it has spent."""
    put_state(campaign, asked(campaign, state_of(campaign), phase, probes))


def settle(campaign: Campaign) -> None:
    """Nothing more will be probed: every phase's plan is what it spent (progress 100 %)."""
    put_state(campaign, settled(campaign, state_of(campaign)))


def charge(campaign: Campaign, measurement_phase: str, probe_seconds: float) -> None:
    """A stored probe: one more probe done, its seconds used, booked to its phase."""
    phase = (MeasurementPhase(measurement_phase).budget_phase
             if measurement_phase in MEASUREMENT_PHASES else measurement_phase)
    state = state_of(campaign)
    put_state(campaign, replace(state, budget=state.budget.charged(phase, probe_seconds)))
    replan(campaign)


def exhaust(campaign: Campaign) -> None:
    """The cap stopped a phase (flagged on the answer)."""
    put_state(campaign, state_of(campaign).with_budget(exhausted=True))


def summary(campaign: Campaign) -> dict[str, Any]:
    """The campaign's probe-second budget, planned and spent per phase (for plans and answers):
    {"budget_s": ..., "planned": {phase: {"probes", "probe_seconds"}}, "spent": {...}}."""
    b = state_of(campaign).budget
    return {"budget_s": b.cap_s,
            "planned": {phase: t.to_dict() for phase, t in b.phase_plan.items()},
            "spent": {phase: t.to_dict() for phase, t in b.spent.items()}}


def left_s(campaign: Campaign) -> float | None:
    """Probe-seconds left of the budget; None: no budget."""
    return state_of(campaign).budget.left_s()


def probe_cost_s(campaign: Campaign, state: CampaignState | None = None) -> float:
    """The probe-seconds one more probe is expected to cost: the plan's duration, or the mean of
    the probes so far where the timing rule lengthened them (long-RTT paths), so the budget is
    not overspent by probes that run longer than planned (by `state`, else the campaign's)."""
    b = (state_of(campaign) if state is None else state).budget
    if b.done and b.used_s:
        return max(campaign.duration_s, b.used_s / b.done)
    return campaign.duration_s


def sweep_reserve_s(campaign: Campaign) -> float:
    """The one reserve rule: the probe-seconds an earlier phase leaves to the buffer sweep (the
    grid's probes, or an adaptive sweep's estimate), at the next probe's cost."""
    probes = (adaptive_sweep_estimate(campaign) if campaign.mode == "adaptive"
              else grid_sweep_probes(campaign))
    return probes * probe_cost_s(campaign)


def autotune_reserve_s(campaign: Campaign) -> float:
    """What an adaptive bulk sweep leaves to the autotune phase: its first point (the top
    ceiling's `CEILING_RUNS` probes, the reference the answer's ceiling is judged against), so
    a sweep that took more probes than planned (a noisy path, a busy host) still leaves the
    answer a ceiling measured in the autotuned regime."""
    if campaign.mode != "adaptive" or objective_of(campaign.objective).is_stream:
        return 0.0
    return CEILING_RUNS * probe_cost_s(campaign)


def affords(campaign: Campaign, probes: int = 1, *, reserve_s: float = 0.0) -> bool:
    """The budget covers `probes` more probes with `reserve_s` kept for a later phase."""
    left = left_s(campaign)
    return left is None or left - reserve_s >= probes * probe_cost_s(campaign)


def progress(campaign: Campaign) -> float:
    """probes_done / probes_total in 0..1."""
    return state_of(campaign).budget.progress()


def remaining_s(campaign: Campaign) -> float:
    """Probe time still to spend: probes left (at least one while the campaign is active) x the
    probe's duration; 0 once it is final. The probing only: setup between probes comes on top."""
    if campaign_store.is_final(campaign):
        return 0.0
    b = state_of(campaign).budget
    return max(1, b.planned - b.done) * probe_cost_s(campaign)
