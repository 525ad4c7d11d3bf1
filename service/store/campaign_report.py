"""What a campaign reports: its decisions as one JSON object (the API, provenance), the flags an
answer from it must carry, and the buffer range it measured. Reads the row and its run state;
writes nothing."""

from __future__ import annotations

from typing import Any

from models import Campaign

from ..state import state_of


def report(campaign: Campaign) -> dict[str, Any]:
    """What a campaign decided and met on the way, as one JSON object (API, provenance)."""
    state = state_of(campaign)
    return {
        **state.legacy_notes(),
        "ccs": campaign.active_ccs,
        "offered_ccs": campaign.offered_ccs,
        "dropped_ccs": dict(campaign.dropped_ccs or {}),
        "impact_runs": campaign.impact_runs,
        "extra_rounds": state.budget.extra_rounds,
        "budget_exhausted": state.budget.exhausted,
        "recommendation_id": campaign.recommendation_id,
    }


def flags(campaign: Campaign) -> list[str]:
    """What a recommendation from this campaign must say is missing from its data."""
    state = state_of(campaign)
    out = []
    if state.failed_probes:
        out.append(f"missing_measurements:{len(state.failed_probes)}")
    if campaign.dropped_ccs:
        out.append("dropped_ccs:" + ",".join(sorted(campaign.dropped_ccs)))
    # An adaptive answer is read off measured means: arms it eliminated early have no fit, and
    # need none.
    if state.unfitted_arms and campaign.mode != "adaptive":
        out.append("unfitted_arms:" + ",".join(state.unfitted_arms))
    if state.budget.exhausted:
        out.append("budget_exhausted")
    if state.grid_extended:
        out.append("grid_extended:" + ",".join(f"{b:g}" for b in state.grid_extended))
    decision = state.sweep_decision
    if decision is not None and decision.stop:  # adaptive:settled / adaptive:budget
        out.append(f"adaptive:{decision.stop}")
        # the rate inside a probe at OBS never settled: the promise is wide, and this is why
        if decision.unsteady_at_obs:
            out.append("unsteady_rate_at_obs")
        # the path moved over time under the probes: the promise covers its range
        if decision.path_varies:
            out.append("path_varies")
    if state.warm is not None and state.warm.verdict:  # warm_confirmed / warm_drifted
        out.append(state.warm.verdict)
    if state.grid_below_plateau:
        out.append(f"grid_below_plateau:{state.grid_below_plateau:g}")
    return out


def buffer_range(campaign: Campaign) -> tuple[float, float]:
    """The buffers a campaign measured: its curves are solved and drawn on this range only
    (a fitted curve is not extrapolated)."""
    grid = campaign.buffer_grid_mib
    return min(grid), max(grid)
