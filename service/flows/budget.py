"""A campaign's probe budget: what each phase plans to probe, what it spent, and what is left.

Every count the campaign reports comes from here, by one formula each:
- `planned`: per budget phase (warm, impact, selection, sweep) the probes the campaign's columns
  imply now (the runs, the grid, the CCs still measured, the extra impact runs), never fewer
  than the phase spent or asked for; `replan` writes their sum as `probes_total`, and both the
  planned and the spent probe-seconds per phase into the campaign's notes (`probe_budget`, shown
  by GET /campaigns and kept with the answer's provenance);
- `charge`: a stored probe's cost, the one place the progress counters move;
- `affords`: whether the probe-seconds budget (None: unbounded) covers more probes;
- `progress` and `remaining_s`: what the API, the dashboard and the fleet policy show and order by.
"""

from __future__ import annotations

import math
from typing import Any

from models import Campaign

from ..algorithm import adaptive
from ..store import campaigns as campaign_store
from .plan import selection_probes
from .selected import sweep_arms

PHASES = ("warm", "impact", "selection", "sweep")
# A measurement row's phase -> the budget phase it is charged to.
_CHARGED_TO = {"warm": "warm", "impact": "impact", "selection": "selection", "buffer": "sweep"}
NOTE = "probe_budget"


def impact_runs(campaign: Campaign) -> dict[str, int]:
    """Impact runs per CC: the plan's, plus those added while an Omega's sign was unsettled."""
    extra = campaign.extra_impact_runs or {}
    base = campaign.impact_runs if campaign.impact_runs is not None else campaign.runs
    return {cc: base + extra.get(cc, 0) for cc in _ccs(campaign)}


def grid_sweep_probes(campaign: Campaign) -> int:
    """Every (PM, CC, buffer, run) of the buffer sweep (Eq. 7); also the adaptive sweep's cap."""
    return len(campaign.pms) * len(_ccs(campaign)) * len(campaign.buffer_grid_mib) * campaign.runs


def adaptive_sweep_cap(campaign: Campaign) -> int:
    """The most an adaptive sweep may probe: the grid with at least the runs an interval needs,
    and the repeats that make T* hold."""
    runs = max(campaign.runs, adaptive.MIN_RUNS)
    grid = len(sweep_arms(campaign, _ccs(campaign))) * len(campaign.buffer_grid_mib) * runs
    return grid + adaptive.T_STAR_MAX_RUNS


def adaptive_sweep_estimate(campaign: Campaign) -> int:
    """An adaptive sweep's estimate: per arm the top of the grid, then a bisection."""
    arms = len(sweep_arms(campaign, _ccs(campaign)))
    steps = 1 + math.ceil(math.log2(len(campaign.buffer_grid_mib)))
    return arms * adaptive.MIN_RUNS * steps


def selection_estimate(campaign: Campaign, n_subflows: int) -> int:
    """A measured selection's estimate (`plan.selection_probes`)."""
    return selection_probes(n_subflows, len(_ccs(campaign)))


def planned(campaign: Campaign, n_subflows: int) -> dict[str, int]:
    """Probes per budget phase, by the campaign's columns now (see the module's docstring)."""
    note = _note(campaign)
    spent = {phase: v["probes"] for phase, v in note["spent"].items()}
    if note.get("settled"):
        return {phase: spent.get(phase, 0) for phase in PHASES}
    warm = (campaign.notes or {}).get("warm") or {}
    plan = dict.fromkeys(PHASES, 0)
    plan["warm"] = int(warm.get("probes", 0))
    if not warm or warm.get("verdict") == "warm_drifted":  # checks only, unless they drifted
        runs = impact_runs(campaign)
        plan["impact"] = (
            # adaptive: TP_0 under every CC, the TP_i under the reference CC only
            sum(runs.values()) + max(runs.values(), default=0) * n_subflows
            if campaign.mode == "adaptive" else sum(runs.values()) * (1 + n_subflows)
        )
        plan["sweep"] = (
            adaptive_sweep_estimate(campaign) if campaign.mode == "adaptive"
            else grid_sweep_probes(campaign)
        )
        if campaign.mode == "adaptive":
            plan["selection"] = selection_estimate(campaign, n_subflows)
    asked = note.get("asked", {})
    return {
        phase: max(count, spent.get(phase, 0), asked.get(phase, 0))
        for phase, count in plan.items()
    }


def replan(campaign: Campaign) -> int:
    """Write `probes_total` and the per-phase plan into the notes; returns the total."""
    counts = planned(campaign, len(campaign.topology.subflows))
    note = _note(campaign)
    note["planned"] = {
        phase: {"probes": n, "probe_seconds": n * probe_cost_s(campaign)}
        for phase, n in counts.items() if n
    }
    note["budget_s"] = campaign.probe_seconds_budget
    campaign_store.add_note(campaign, NOTE, note)
    campaign.probes_total = sum(counts.values())
    return campaign.probes_total


def ask(campaign: Campaign, phase: str, probes: int) -> None:
    """A phase that chooses its probes as it goes needs `probes` more than it has spent."""
    note = _note(campaign)
    spent = note["spent"].get(phase, {}).get("probes", 0)
    note["asked"] = {**note.get("asked", {}), phase: spent + probes}
    campaign_store.add_note(campaign, NOTE, note)
    replan(campaign)


def settle(campaign: Campaign) -> None:
    """Nothing more will be probed: every phase's plan is what it spent (progress 100 %)."""
    note = _note(campaign)
    note["settled"] = True
    campaign_store.add_note(campaign, NOTE, note)
    replan(campaign)


def charge(campaign: Campaign, measurement_phase: str, probe_seconds: float) -> None:
    """A stored probe: one more probe done, its seconds used, booked to its phase."""
    campaign.probes_done += 1
    campaign.probe_seconds_used += float(probe_seconds)
    note = _note(campaign)
    phase = _CHARGED_TO.get(measurement_phase, measurement_phase)
    was = note["spent"].get(phase, {"probes": 0, "probe_seconds": 0.0})
    note["spent"][phase] = {
        "probes": was["probes"] + 1, "probe_seconds": was["probe_seconds"] + float(probe_seconds)
    }
    campaign_store.add_note(campaign, NOTE, note)
    replan(campaign)


def summary(campaign: Campaign) -> dict[str, Any]:
    """The campaign's probe-second budget, planned and spent per phase (for plans and answers):
    {"budget_s": ..., "planned": {phase: {"probes", "probe_seconds"}}, "spent": {...}}."""
    note = _note(campaign)
    return {"budget_s": campaign.probe_seconds_budget, "planned": note.get("planned", {}),
            "spent": note["spent"]}


def left_s(campaign: Campaign) -> float | None:
    """Probe-seconds left of the budget; None: no budget."""
    if campaign.probe_seconds_budget is None:
        return None
    return campaign.probe_seconds_budget - campaign.probe_seconds_used


def probe_cost_s(campaign: Campaign) -> float:
    """The probe-seconds one more probe is expected to cost: the plan's duration, or the mean of
    the probes so far where the timing rule lengthened them (long-RTT paths), so the budget is
    not overspent by probes that run longer than planned."""
    if campaign.probes_done and campaign.probe_seconds_used:
        return max(campaign.duration_s, campaign.probe_seconds_used / campaign.probes_done)
    return campaign.duration_s


def affords(campaign: Campaign, probes: int = 1, *, reserve_s: float = 0.0) -> bool:
    """The budget covers `probes` more probes with `reserve_s` kept for a later phase."""
    left = left_s(campaign)
    return left is None or left - reserve_s >= probes * probe_cost_s(campaign)


def progress(campaign: Campaign) -> float:
    """probes_done / probes_total in 0..1."""
    if not campaign.probes_total:
        return 0.0
    return min(1.0, campaign.probes_done / campaign.probes_total)


def remaining_s(campaign: Campaign) -> float:
    """Probe time still to spend: probes left (at least one while the campaign is active) x the
    probe's duration; 0 once it is final. The probing only: setup between probes comes on top."""
    if campaign_store.is_final(campaign):
        return 0.0
    return max(1, campaign.probes_total - campaign.probes_done) * probe_cost_s(campaign)


def _ccs(campaign: Campaign) -> list[str]:
    return campaign.active_ccs if campaign.active_ccs is not None else campaign.ccs


def _note(campaign: Campaign) -> dict[str, Any]:
    note = dict((campaign.notes or {}).get(NOTE) or {})
    note["spent"] = dict(note.get("spent") or {})
    return note
