"""A campaign's measured subflow selection as it is kept: the subset a selection probe ran (its
key) and SP* per CC from the campaign's state. Read by the sweep, the fit, the answer, the warm
check, the bundle and the report (every flow domain: so here, below them); written by
`flows.campaign.phases.selection`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models import Campaign
from probes.vocabulary import FULLMESH, PCDC

from .campaign_state import state_of
from .selection_state import Selection

PREFIX = "only:"  # a selection run's key: the probed subset, in the topology's order


def subset_key(subset: Sequence[str]) -> str:
    return PREFIX + "+".join(subset)


def subset_of_key(key: str) -> tuple[str, ...]:
    return tuple(key[len(PREFIX):].split("+")) if key.startswith(PREFIX) else ()


def measured_selection(campaign: Campaign) -> Selection | None:
    """The finished selection (per CC: SP*, its path, standbys, Ω's view); None without one."""
    selection = state_of(campaign).selection
    return selection if selection is not None and selection.done else None


def selection_note(campaign: Campaign) -> dict[str, Any] | None:
    """The finished selection's JSON form (the bundle's `selection`); None without one."""
    selection = measured_selection(campaign)
    return None if selection is None else selection.to_dict()


def selected_subsets(campaign: Campaign) -> dict[str, list[str]]:
    """SP* per CC from a finished selection (empty when the campaign has none)."""
    selection = measured_selection(campaign)
    if selection is None:
        return {}
    return {cc: list(e.subset) for cc, e in selection.ccs.items() if e.usable}


def sweep_arms(campaign: Campaign, ccs: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """The (PM, CC) arms an adaptive sweep measures: every PM x CC, except a PCDC arm whose SP*
    is every subflow while FullMesh is swept for that CC. Both run the very subflows on the
    userspace path manager, so the probe is the same, and the solver lets FullMesh shadow such a
    PCDC arm (`solver.choose_among_tied`): measuring it again bought nothing but probes."""
    ccs = list(ccs if ccs is not None else campaign.measured_ccs)
    return [(pm, cc) for pm in campaign.pms for cc in ccs
            if not (pm == PCDC and cc in merged_into_fullmesh(campaign))]


def merged_into_fullmesh(campaign: Campaign) -> set[str]:
    """The CCs whose PCDC arm an adaptive sweep leaves to FullMesh (see `sweep_arms`)."""
    if campaign.mode != "adaptive" or FULLMESH not in campaign.pms or campaign.topology is None:
        return set()
    names = {sf.name for sf in campaign.topology.subflows}
    ccs = campaign.measured_ccs
    if len(names) < 2:  # one subflow: PCDC can only keep it
        return set(ccs)
    return {cc for cc, subset in selected_subsets(campaign).items()
            if cc in ccs and set(subset) == names}
