"""Which tool a campaign's probes run on across real sites, and the refusal of a plan that
cannot run on the sites' tools.

Real sites have capability reports (`mpcoa worker --site --isp`): each names the tools its host
has and what each allows (`probes.tools.choice`). A tool served by a long-lived node
(NetPerfMeter) counts at a site only where its worker runs that node (the tool's `node_key` in
the report, ``netperfmeter_passive``): the active side needs a server at the receiving site. The
emulated testbed's sites have no reports: there the prober decides per probe from this host's
tools (`flows.campaign.probing.TestbedProber`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from models import Topology
from probes.base import CapabilityError, MeasurementRequest, ProbeError
from probes.tools import choice as probe_tools
from probes.tools.registry import TOOLS, ProbeTool

from ...db import session_scope
from ...errors import Invalid
from ...settings import Settings
from ...store import artifacts as artifact_store
from ...store import campaigns as campaign_store
from ...store import inventory
from .plan import Plan

#: names a stored report may still give a tool (reports of workers from before its one name)
FORMER_NAMES = {"mpcoa-paced": "paced"}


def binaries(settings: Settings) -> dict[str, str | None]:
    """Tool name -> the binary the deployment's settings give it (the others: their default)."""
    return {"iperf3": settings.iperf3_binary}


def site_tools(report: dict[str, Any]) -> dict[str, Any]:
    """A capability report's tools as `probes.tools.choice.choose` takes them: a tool served
    by a long-lived node only where the site runs its node (two-sided probes need the
    receiving site's server)."""
    tools = {FORMER_NAMES.get(k, k): v for k, v in (report.get("tools") or {}).items()}
    for tool in TOOLS.values():
        if tool.node_key is not None and not report.get(tool.node_key):
            tools[tool.name] = None
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


def for_probe(campaign_id: int, request: MeasurementRequest
              ) -> tuple[ProbeTool, dict[str, Any] | None]:
    """(tool, the receiver's report) for a probe between real sites, chosen from both sites'
    reports; where a site has not reported its tools, the tool that needs no report and None."""
    with session_scope() as s:
        campaign = campaign_store.get_campaign(s, campaign_id=campaign_id)
        topology = inventory.get_topology(s, topology_id=campaign.topology_id)
        got = reports(s, topology)
    try:
        if got is None:
            return TOOLS[probe_tools.without_inventory(request.profile.kind)], None
        sides = [site_tools(got[request.sender]), site_tools(got[request.receiver])]
        name = probe_tools.choose(request.tool, request.profile.kind, sides)
    except CapabilityError as exc:
        raise ProbeError(str(exc)) from None
    return TOOLS[name], got[request.receiver]


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
