"""The first phase: the campaign's CCs that both sites offer; the rest are reported as dropped
with the reason.

Both sites' workers reported their capabilities (real sites): the CCs both reports offer.
Otherwise (the emulated testbed, or a site that has not reported): the prober's view.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from ....state import state_of
from ....store import artifacts as artifact_store
from .. import budget
from .base import DONE, Context, PhaseVerdict

name = "ccs"
log = logging.getLogger(__name__)


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    if campaign.active_ccs is not None:
        return DONE
    topology = campaign.topology
    reported = artifact_store.reported_ccs(
        ctx.session, site_ids=[topology.local_site_id, topology.remote_site_id])
    if len(reported) == 2:
        offered = set.intersection(*(set(v) for v in reported.values()))

        def reason(cc: str) -> str:
            lacking = [name for name, ccs in sorted(reported.items()) if cc not in ccs]
            return f"not offered by site {' and '.join(lacking)} (its worker's capability report)"

        source = "site capability reports"
    else:
        offered = set(ctx.prober.available_ccs())

        def reason(cc: str) -> str:
            return "not offered by both sites' kernels (tcp_available_congestion_control)"

        source = "prober"
    log.info("campaign %s: CCs from %s: %s", campaign.id, source, sorted(offered))
    campaign.offered_ccs = sorted(offered)
    campaign.active_ccs = [cc for cc in campaign.ccs if cc in offered]
    campaign.dropped_ccs = {cc: reason(cc) for cc in campaign.ccs if cc not in offered}
    # Extra rounds for the quality gate add buffer runs only: the impact phase keeps its runs.
    # In adaptive mode the measured selection decides SP*: one impact run per CC shows Omega
    # (and gives the selection its TP_0 and TP_i subsets) without deciding anything.
    campaign.impact_runs = 1 if campaign.mode == "adaptive" else campaign.runs
    # The plan the CC columns just written imply: returned, `next_step` saves it.
    state = budget.replanned(campaign, state_of(campaign))
    if not campaign.active_ccs:
        failed = ctx.fail(
            f"none of the campaign's CCs {campaign.ccs} is offered by both "
            f"sites (they offer {sorted(offered)})"
        )
        return replace(failed, state=state)
    ctx.session.flush()
    return PhaseVerdict(state=state)
