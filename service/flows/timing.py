"""How long a campaign's probe runs and how much of its start is left out, by the timing rule
(`algorithm.probe_duration`) over the subflows the step uses.

RTTs: the topology's, where the operator gave them; else the smallest RTT the campaign's earlier
probes observed on that subflow. Without an RTT for every used subflow the plan's duration and
the probes' default warm-up stand. The rule only ever lengthens a probe: on short paths the
plan's figures already cover slow start, and they stay what they were.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from models import Campaign

from ..algorithm.probe_duration import ProbeTiming, probe_timing
from ..store import measurements
from .plan import ProbeStep
from .probing import buffer_bytes


def step_timing(session: Session, campaign: Campaign, step: ProbeStep) -> ProbeTiming:
    """The timing of `step`: the rule's warm-up and duration with every input it used."""
    used = set(step.allowed_subflows) if step.allowed_subflows is not None else None
    subflows = [sf for sf in campaign.topology.subflows if used is None or sf.name in used]
    observed = measurements.min_rtts_ms(session, campaign_id=campaign.id)
    links = [(sf.bandwidth_kbps, sf.rtt_ms or observed.get(sf.name)) for sf in subflows]
    return probe_timing(links, campaign.duration_s, buffer_bytes=buffer_bytes(step.bs_mib))


def lengthened(timing: ProbeTiming) -> bool:
    """The rule asks for more than the plan's duration (else the plan's figures stand)."""
    return timing.decided_by == "rule"
