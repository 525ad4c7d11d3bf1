"""A campaign's measured subflow selection as it is kept: the subset a selection probe ran (its
key) and SP* per CC from the campaign's notes. Read by the sweep, the fit and the answer; written
by `phases.selection`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models import Campaign

NOTE = "selection"
PREFIX = "only:"  # a selection run's key: the probed subset, in the topology's order


def subset_key(subset: Sequence[str]) -> str:
    return PREFIX + "+".join(subset)


def subset_of_key(key: str) -> tuple[str, ...]:
    return tuple(key[len(PREFIX):].split("+")) if key.startswith(PREFIX) else ()


def selection_note(campaign: Campaign) -> dict[str, Any] | None:
    """The finished selection (per CC: SP*, its path, standbys, Ω's view); None without one."""
    note = (campaign.notes or {}).get(NOTE) or {}
    return note if note.get("done") else None


def selected_subsets(campaign: Campaign) -> dict[str, list[str]]:
    """SP* per CC from a finished selection (empty when the campaign has none)."""
    note = selection_note(campaign) or {}
    return {cc: list(e["subset"]) for cc, e in note.get("ccs", {}).items() if e.get("usable")}
