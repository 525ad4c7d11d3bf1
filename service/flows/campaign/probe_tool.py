"""Which tool a campaign's probes run on across real sites, and the refusal of a plan that
cannot run on the sites' tools.

Real sites have capability reports (`mpcoa worker --site --isp`): each names the tools its host
has and what each allows (`probes.tools.choice`). NetPerfMeter counts at a site only where its
worker runs the long-lived passive node (`netperfmeter_passive` in the report): the active side
needs a server at the receiving site. The emulated testbed's sites have no reports: there the prober
decides per probe from this host's tools (`flows.campaign.probing.TestbedProber`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from models import Topology
from probes.base import CapabilityError
from probes.tools import choice as probe_tools

from ...errors import Invalid
from ...store import artifacts as artifact_store
from .plan import Plan


def site_tools(report: dict[str, Any]) -> dict[str, Any]:
    """A capability report's tools as `probes.tools.choice.choose` takes them: NetPerfMeter only
    with its passive node running (two-sided probes need the receiving site's server)."""
    tools = dict(report.get("tools") or {})
    if not report.get("netperfmeter_passive"):
        tools["netperfmeter"] = None
    return tools


def reports(session: Session, topology: Topology) -> dict[str, dict[str, Any]] | None:
    """Site name -> its capability report, when both sites reported their tools (real sites);
    else None (a report that names no tools says nothing about them)."""
    out = {}
    for site in (topology.local_site, topology.remote_site):
        row = artifact_store.capabilities_or_none(session, site_id=site.id)
        if row is None or not isinstance((row.report or {}).get("tools"), dict):
            return None
        out[site.name] = dict(row.report or {})
    return out


def backends(plan: Plan, sides: list[dict[str, Any]]) -> dict[str, str]:
    """Profile kind -> the backend the plan's probes of that kind run on (CapabilityError when
    one cannot run). Every campaign probes bulk (impact, selection); a stream's sweep paces."""
    kinds = ["bulk"] + (["paced"] if plan.objective.is_stream else [])
    return {kind: probe_tools.choose(plan.probe_tool, kind, sides) for kind in kinds}


def refuse_unrunnable(session: Session, topology: Topology, plan: Plan) -> None:
    """Invalid (422) naming what to install when the sites' reported tools cannot run the
    plan: a stream with no frame-level tool on both sites, NetPerfMeter asked for where a site
    has no NetPerfMeter 2.x passive node. Sites without reports are checked when probed."""
    got = reports(session, topology)
    if got is None:
        return
    try:
        backends(plan, [site_tools(r) for r in got.values()])
    except CapabilityError as exc:
        raise Invalid(f"the sites {' and '.join(got)} cannot run this campaign: {exc}",
                      ("body", "probe_tool")) from None
