"""The probe tool is part of a campaign's plan: validated (422), stored, shown; a plan the
sites' reported tools cannot run is refused with what to install."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from models import Campaign
from probes.tools.paced_tool import VERSION
from service.settings import Settings
from service.store import artifacts
from tests.builders import post_topology

from .conftest import HU, SRL

STREAM = {"kind": "stream", "bitrate_mbps": 2}
DEBIAN = {"iperf3": "3.12", "mptcpize": "present", "netperfmeter": None}


def plan(topology_id, **extra):
    return {"topology_id": topology_id, "ccs": ["cubic"], "buffer_grid_mib": [1, 2, 4],
            "runs": 1, "duration_s": 2, **extra}


def report(tools, **extra):
    return {"congestion_controls": ["cubic", "reno"], "tools": tools, **extra}


def test_the_setting_is_one_of_three(monkeypatch):
    assert Settings(_env_file=None).probe_tool == "auto"
    monkeypatch.setenv("MPCOA_PROBE_TOOL", "netperfmeter")
    assert Settings(_env_file=None).probe_tool == "netperfmeter"
    monkeypatch.setenv("MPCOA_PROBE_TOOL", "netperf")
    with pytest.raises(ValidationError, match="probe_tool"):
        Settings(_env_file=None)


def test_the_plan_names_its_tool(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    bad = client.post("/campaigns", json=plan(topo["id"], probe_tool="netperf"), headers=auth)
    assert bad.status_code == 422 and "probe_tool" in bad.text, bad.text
    r = client.post("/campaigns", json=plan(topo["id"], probe_tool="iperf3"), headers=auth)
    assert r.status_code == 202, r.text
    assert r.json()["probe_tool"] == "iperf3"
    assert db_session.get(Campaign, r.json()["id"]).probe_tool == "iperf3"
    page = client.get(f"/dashboard/campaigns/{r.json()['id']}", headers=auth)
    assert page.status_code == 200 and 'id="campaign-probe-tool">iperf3' in page.text


def test_what_the_sites_cannot_run_is_refused(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    # a worker that predates the paced tool's report, and one with Debian's tools
    artifacts.save_capabilities(db_session, site_name="SRL", report=report(DEBIAN))
    artifacts.save_capabilities(db_session, site_name="HU",
                                report=report({**DEBIAN, "mpcoa-paced": VERSION}))
    db_session.commit()
    r = client.post("/campaigns", json=plan(topo["id"], objective=STREAM), headers=auth)
    assert r.status_code == 422, r.text
    said = r.text
    assert "frame-level tool" in said and "NetPerfMeter 2.x" in said and "paced tool" in said
    # bulk runs on iperf3 at both
    ok = client.post("/campaigns", json=plan(topo["id"]), headers=auth)
    assert ok.status_code == 202, ok.text
    db_session.get(Campaign, ok.json()["id"]).state = "cancelled"
    # NetPerfMeter 2.x present but no passive node at a site: two-sided probes cannot run it
    npm = {**DEBIAN, "netperfmeter": "2.0.10", "mpcoa-paced": VERSION}
    artifacts.save_capabilities(db_session, site_name="SRL", report=report(npm))
    artifacts.save_capabilities(db_session, site_name="HU", report=report(npm))
    db_session.commit()
    r = client.post("/campaigns", json=plan(topo["id"], probe_tool="netperfmeter"), headers=auth)
    assert r.status_code == 422 and "MPCOA_NETPERFMETER" in r.text, r.text
    # auto: iperf3 and the paced tool there
    ok = client.post("/campaigns", json=plan(topo["id"], objective=STREAM), headers=auth)
    assert ok.status_code == 202, ok.text


def test_netperfmeter_counts_at_a_real_site_only_with_its_passive_node():
    from probes.tools.choice import choose
    from service.flows.campaign.probe_tool import site_tools

    npm = {**DEBIAN, "netperfmeter": "2.0.10", "mpcoa-paced": VERSION}
    without = site_tools(report(npm))
    with_node = site_tools(report(npm, netperfmeter_passive={"port": 20001}))
    assert without["netperfmeter"] is None and with_node["netperfmeter"] == "2.0.10"
    assert choose("auto", "bulk", [without, with_node]) == "iperf3"
    assert choose("auto", "paced", [with_node, with_node]) == "netperfmeter"
