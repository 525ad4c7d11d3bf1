"""Which probes to start on a fleet of sites: a pure scheduling policy.

A probe occupies both of its campaign's sites; a campaign runs one probe at a time (its lease).
The policy is greedy, longest-remaining-first on the busiest site: among campaigns whose two sites
are both free, start first the one whose busier site has the most work left, because the busiest
site's total probe time is the makespan's lower bound and it must never sit idle while it has work.
The database lock (`store.sitelocks`) enforces exclusion; this only chooses the order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Pending:
    """A campaign with probes left: its two sites and the remaining probe time (seconds)."""

    campaign: str
    sites: tuple[str, str]
    remaining_s: float


def site_work(pending: Iterable[Pending]) -> dict[str, float]:
    """Remaining probe time per site (a probe counts on both of its sites)."""
    work: dict[str, float] = {}
    for p in pending:
        for site in p.sites:
            work[site] = work.get(site, 0.0) + p.remaining_s
    return work


def choose(
    pending: Iterable[Pending], free_sites: set[str], work: Mapping[str, float] | None = None
) -> list[Pending]:
    """Campaigns to start a probe now, none sharing a site, busiest-site-first. `work`: the
    remaining probe time per site, when more campaigns need the sites than `pending` holds."""
    pending = [p for p in pending if p.remaining_s > 0]
    work = site_work(pending) if work is None else work

    def urgency(p: Pending) -> tuple[float, float, str]:
        a, b = (work[s] for s in p.sites)
        return (max(a, b), min(a, b), p.campaign)  # campaign name: a stable tie-break

    free = set(free_sites)
    chosen = []
    for p in sorted(pending, key=urgency, reverse=True):
        if all(s in free for s in p.sites):
            chosen.append(p)
            free.difference_update(p.sites)
    return chosen


def gives_way(
    me: str, pending: Iterable[Pending], free_sites: set[str], asking: set[str]
) -> str | None:
    """The campaign `me` should leave its sites to now, or None if it may take them.

    Each campaign's executor asks this before it takes its sites (`leasing.claim`), so the
    fleet follows `choose` without a central scheduler. Only `me` and the campaigns `asking`
    (their executors asked for their sites recently) compete, with every pending campaign's
    work counted: a campaign nobody is running can never hold the others up.
    """
    pending = [p for p in pending if p.remaining_s > 0]
    mine = next((p for p in pending if p.campaign == me), None)
    if mine is None:
        return None
    rivals = [p for p in pending if p.campaign == me or p.campaign in asking]
    for p in choose(rivals, free_sites, work=site_work(pending)):
        if p.campaign == me:
            return None
        if set(p.sites) & set(mine.sites):
            return p.campaign
    return None


def lower_bound(durations: Mapping[str, float], sites: Mapping[str, tuple[str, str]]) -> float:
    """The busiest site's total probe time: no schedule can finish before it."""
    return max(site_work(Pending(c, sites[c], d) for c, d in durations.items()).values())
