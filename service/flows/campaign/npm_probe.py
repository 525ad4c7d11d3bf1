"""NetPerfMeter probes across real sites: the sender's worker runs the active side against the
receiving site's long-lived passive node (`probes.tools.npm_twosided`), whose port and addresses the
receiving site's capability report names. No session with the receiver is needed: its node
serves every probe and sends its results back over the control connection.

Which backend a probe of a real site pair runs on is decided here from both sites' reports
(`probe_tool`); the emulated testbed decides from this host's tools (`flows.campaign.probing`).
"""

from __future__ import annotations

from typing import Any

from probes import cc_users
from probes.base import CapabilityError, MeasurementRequest, MeasurementResult, ProbeError
from probes.site.local import LocalSite
from probes.tools import choice as probe_tools
from probes.tools.netperfmeter import default_binary
from probes.tools.npm_twosided import active_measure

from ...db import session_scope
from ...store import campaigns as campaign_store
from ...store import inventory
from . import probe_tool


def _reports(campaign_id: int) -> dict[str, dict[str, Any]] | None:
    with session_scope() as s:
        campaign = campaign_store.get_campaign(s, campaign_id=campaign_id)
        topology = inventory.get_topology(s, topology_id=campaign.topology_id)
        return probe_tool.reports(s, topology)


def backend_for(campaign_id: int, request: MeasurementRequest) -> tuple[str | None, dict | None]:
    """(backend, the receiver's report) for a probe between real sites; (None, None) when a
    site has not reported its tools (the probe then runs two-sided on iperf3 as before)."""
    got = _reports(campaign_id)
    if got is None:
        return None, None
    sides = [probe_tool.site_tools(got[request.sender]), probe_tool.site_tools(
        got[request.receiver])]
    try:
        backend = probe_tools.choose(request.tool, request.profile.kind, sides)
    except CapabilityError as exc:
        raise ProbeError(str(exc)) from None
    return backend, got[request.receiver]


def active_side(*, request: MeasurementRequest, site: LocalSite,
                receiver_report: dict[str, Any], key: str) -> MeasurementResult:
    """The sender's half of a NetPerfMeter probe against the receiving site's node."""
    if request.sender != site.name:
        raise ProbeError(f"active side of {request.sender!r} run at site {site.name!r}")
    node = receiver_report.get("netperfmeter_passive") or {}
    addrs = receiver_report.get("endpoints") or {}
    if not isinstance(node.get("port"), int) or not addrs:
        raise ProbeError(f"site {request.receiver!r} reports no NetPerfMeter passive node "
                         "(its worker runs one when it has NetPerfMeter 2.x)")
    with cc_users.using([request.cc], f"sending side of probe {key}"):
        return active_measure(request, sender_addrs=site.isps, receiver_addrs=dict(addrs),
                              port=node["port"], binary=default_binary())
