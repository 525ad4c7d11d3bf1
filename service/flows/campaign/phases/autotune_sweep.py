"""The autotuning ceiling, measured in its own regime, after the buffer sweep decided.

The sweep's OBS is a locked buffer (SO_SNDBUF/SO_RCVBUF on both ends). An application that sets
none is autotuned up to tcp_rmem/tcp_wmem's maximum, which an apply writes for every connection
of a site; so that maximum is measured too: the decided arm (its PM, CC and subflows) probed
with no buffer under each candidate ceiling (`algorithm.autotune_ceiling.candidate_ceilings`:
2 x each grid buffer, and the testbed's own ceiling as the reference), `CEILING_RUNS` runs
each: the top first and then a bisection (`next_ceiling`), stored in the "autotune"
measurement phase with the ceiling as the key's bs_mib. The
answer's `autotune_max_mib` is read off them at finish (`answers.calibrated._with_autotune`).

Only on the emulated testbed: a probe sets the ceiling inside the testbed's namespaces for its
own duration (`Testbed.autotune_ceiling`); at a real site the ceiling is every connection's, so
a campaign whose sites report through their workers skips the phase (the answer then has no
`autotune_max_mib` and the apply plan says the ceiling is unmeasured). The probes are charged
to the budget's "autotune" phase; the plan counts them from the start (`budget.planned`). The
adaptive sweep before it leaves the phase its first point (`budget.autotune_reserve_s`); after
that, a point is begun only when the budget covers all its runs, one it cannot cover ends
the phase, and a begun point is finished.
"""

from __future__ import annotations

from models import NO_EXCLUSION, MeasurementPhase
from probes.vocabulary import PCDC

from ....algorithm.autotune_ceiling import CEILING_RUNS, next_ceiling
from ....state import BulkSweepOutcome, state_of
from ....store import artifacts
from .. import budget
from ..plan import ProbeStep
from .base import DONE, Context, PhaseVerdict, probe

name = budget.AUTOTUNE


def measured_here(ctx: Context) -> bool:
    """The phase runs: the campaign's sites are the emulated testbed's, not hosts that report
    through their workers."""
    topology = ctx.campaign.topology
    return not any(artifacts.worker_report(ctx.session, site_name=s.name) is not None
                   for s in (topology.local_site, topology.remote_site))


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    outcome = state_of(campaign).sweep_decision
    if not isinstance(outcome, BulkSweepOutcome) or outcome.decision.opm is None:
        return DONE  # nothing decided: no arm to measure autotuned
    if not measured_here(ctx):
        return DONE  # real sites: their ceiling is every connection's (the module's docstring)
    d = outcome.decision
    allowed = None
    if d.opm == PCDC:
        subset = ctx.subsets().get(d.occ)
        if subset and set(subset) != set(ctx.subflows):
            allowed = tuple(subset)
    samples: dict[float, list[float]] = {}
    tried: dict[float, int] = {}
    for m in ctx.runs(MeasurementPhase.AUTOTUNE):
        if m.pm == d.opm and m.cc == d.occ:
            tried[m.bs_mib] = tried.get(m.bs_mib, 0) + 1
            if m.status == "ok" and m.mean_goodput_mbps is not None:
                samples.setdefault(m.bs_mib, []).append(m.mean_goodput_mbps)
    candidates = budget.autotune_ceilings(campaign.buffer_grid_mib or [])
    ceiling = next_ceiling(candidates, samples, tried, campaign.delta)
    if ceiling is None:
        return DONE
    # A point is begun only when the budget covers all its runs, and a begun point is finished:
    # one run has no spread of its own, and a point left half-measured would be judged on less
    # than the others. The check is made once, at its first run, because a probe's expected
    # cost is the mean so far: probes that ran long raise it, and a point the budget covered
    # could fail the check half-way (at most CEILING_RUNS - 1 probes past the budget).
    begun = tried.get(ceiling, 0) > 0
    if not begun and not budget.affords(campaign, CEILING_RUNS):
        return DONE
    step = ProbeStep(MeasurementPhase.AUTOTUNE, d.opm, d.occ, ceiling, tried.get(ceiling, 0) + 1,
                     NO_EXCLUSION, allowed)
    left = budget.autotune_probes(campaign.buffer_grid_mib or []) - sum(tried.values())
    return probe(step, budget.asked(campaign, state_of(campaign), name, max(1, left)),
                 committed=begun)
