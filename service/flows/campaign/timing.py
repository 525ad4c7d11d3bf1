"""How long a campaign's probe runs and how much of its start is left out, by the timing rule
(`algorithm.probe_duration`) over the subflows the step uses.

RTTs: the topology's, where the operator gave them; else the smallest RTT the campaign's earlier
probes observed on that subflow. Without an RTT for every used subflow the plan's duration and
the probes' default warm-up stand. The rule only lengthens a probe that would otherwise be mostly
slow start (SRL-HU's 300 ms paths: 8 doublings and the joins take 3.5 s, past a 2 s warm-up); on
short paths the plan's figures already cover slow start, and they stay what they were.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from models import Campaign
from probes.base import DEFAULT_WARMUP_S

from ...algorithm.probe_duration import ProbeTiming, probe_timing
from ...store import measurements
from .plan import ProbeStep
from .probing import buffer_bytes


def step_timing(session: Session, campaign: Campaign, step: ProbeStep,
                observed: dict[str, float] | None = None) -> ProbeTiming:
    """The timing of `step`: the rule's warm-up and duration with every input it used.
    `observed`: the campaign's smallest RTTs per subflow (`observed_rtts`), when the caller
    times several steps at once; else read here."""
    used = set(step.allowed_subflows) if step.allowed_subflows is not None else None
    subflows = [sf for sf in campaign.topology.subflows if used is None or sf.name in used]
    if observed is None:
        observed = observed_rtts(session, campaign)
    links = [(sf.bandwidth_kbps, sf.rtt_ms or observed.get(sf.name)) for sf in subflows]
    return probe_timing(links, campaign.duration_s, buffer_bytes=buffer_bytes(step.bs_mib))


def observed_rtts(session: Session, campaign: Campaign) -> dict[str, float]:
    """The smallest RTT the campaign's probes observed per subflow (one query)."""
    return measurements.min_rtts_ms(session, campaign_id=campaign.id)


def lengthened(timing: ProbeTiming) -> bool:
    """The probe would be mostly slow start as planned: the rounds of slow start to the window
    the paths need take longer than the plan's warm-up (the probes' default, at most half the
    duration). Then the rule's warm-up and duration stand; otherwise the plan's figures do, so a
    short probe on short paths stays what it was asked to be."""
    if timing.decided_by != "rule" or timing.rtt_max_ms is None:
        return False
    slow_start_s = timing.rtt_max_ms / 1000.0 * ((timing.slow_start_rounds or 0)
                                                 + timing.margin_rtts)
    return slow_start_s > min(DEFAULT_WARMUP_S, timing.configured_duration_s / 2)
