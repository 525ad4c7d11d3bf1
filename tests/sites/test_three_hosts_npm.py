"""Campaigns across real hosts on NetPerfMeter: each site's worker runs its long-lived passive
node and names it in its capability report; a campaign A->B asked for NetPerfMeter runs every
probe there (the active side at A against B's node), and its answer stands beside the same
campaign's on iperf3. Needs NetPerfMeter 2.x (MPCOA_NETPERFMETER): deselected without it."""

from __future__ import annotations

import json
import secrets

import pytest

from models import Campaign, Recommendation
from probes.tools.netperfmeter import default_binary
from service.db import get_engine, session_scope
from service.settings import Settings
from tests.support import wait_for

from . import test_three_hosts as t3
from . import threehosts as th
from .test_three_hosts import BUDGET, PLAN, PROBES, SiteWorkers, finished, measurements, topology

# the three-host module's fixtures (its database, broker, API and sites)
names, db, redis_db, hosts_api, site_ids = t3.names, t3.db, t3.redis_db, t3.hosts_api, t3.site_ids
BASE = 4  # addresses of their own: the three-host module may run beside this one


@pytest.fixture(scope="module")
def network(names):
    tag = secrets.token_hex(2)
    net = None
    try:
        net = th.build(tag, {names[k]: v for k, v in t3.LABELS.items()}, base=BASE)
        yield net
    finally:
        if net is None:
            net = th.Network(tag, f"m3{tag}c")
            net.hosts = {names[k]: th.Host(names[k], f"m3{tag}{i}", {}, "")
                         for i, k in enumerate(t3.LABELS)}
        th.destroy(net)
        assert not [n for n in th.sh("ip", "netns", "list").stdout.split() if f"m3{tag}" in n]


@pytest.fixture(scope="module")
def forwarder(network):
    fwd = th.Forwarder([h.mgmt_root for h in network.hosts.values()], [5432, 6379]).start()
    try:
        yield fwd
    finally:
        fwd.stop()

pytestmark = [pytest.mark.netns, pytest.mark.postgres, pytest.mark.broker,
              pytest.mark.netperfmeter]


@pytest.fixture(scope="module")
def npm_workers(network, forwarder, db, redis_db, names, tmp_path_factory):
    w = SiteWorkers(tmp_path_factory.mktemp("sites"), network, db, redis_db,
                    extra_env={"MPCOA_NETPERFMETER": default_binary()})
    try:
        for key in ("A", "B"):
            w.start(names[key])
        yield w
    finally:
        w.stop_all()


def passive_node(hosts_api, site_id: int) -> dict | None:
    r = hosts_api.get(f"/sites/{site_id}/capabilities")
    return r.json()["report"].get("netperfmeter_passive") if r.status_code == 200 else None


def run(hosts_api, tid: int, tool: str) -> dict:
    body = {"topology_id": tid, **PLAN, "probe_seconds_budget": BUDGET, "probe_tool": tool}
    r = hosts_api.post("/campaigns", json=body)
    assert r.status_code == 202, r.text
    cid = r.json()["id"]
    return wait_for(lambda: finished(hosts_api, cid), 400, f"campaign {cid} on {tool}")


def answer(db: str, cid: int) -> Recommendation:
    with session_scope(get_engine(Settings(database_url=db, _env_file=None))) as s:
        rec = s.get(Recommendation, s.get(Campaign, cid).recommendation_id)
        s.expunge_all()
        return rec


def test_a_campaign_across_hosts_on_netperfmeter_beside_iperf3(
        hosts_api, site_ids, names, npm_workers, db):
    for key in ("A", "B"):
        node = wait_for(lambda k=key: passive_node(hosts_api, site_ids[k]), 60,
                        f"site {key}'s passive node in its report")
        assert node["data_port"] == node["port"] - 1 and node["version"].startswith("2.")
    tid = topology(hosts_api, site_ids, "A", "B")
    answers = {}
    for tool in ("netperfmeter", "iperf3"):
        done = run(hosts_api, tid, tool)
        assert done["state"] == "done", (done, npm_workers.logs())
        assert done["probe_tool"] == tool and done["probes_done"] == PROBES
        rows = [m for m in measurements(db, done["id"]) if m.status == "ok"]
        assert len(rows) >= PROBES - 1
        assert {m.tool for m in rows} == {tool}, {m.tool for m in rows}
        assert all(json.loads(m.raw_output)["raw"]["two_sided"] for m in rows)
        rec = answer(db, done["id"])
        assert rec.otp_mbps > 0
        answers[tool] = rec
        # orchestration overhead: the campaign's wall time beyond its probe-seconds
        wall = done["elapsed_s"]
        print(f"{tool}: {done['probes_done']} probes, {done['probe_seconds_used']:.1f} "
              f"probe-s in {wall:.1f} s wall: overhead "
              f"{(wall - done['probe_seconds_used']) / done['probe_seconds_used']:.2f}")
    npm, iperf3 = answers["netperfmeter"], answers["iperf3"]
    print(f"A->B netperfmeter: {npm.opm}/{npm.occ} {npm.obs_mib:g} MiB, "
          f"{npm.otp_mbps:.2f} Mbit/s; iperf3: {iperf3.opm}/{iperf3.occ} "
          f"{iperf3.obs_mib:g} MiB, {iperf3.otp_mbps:.2f} Mbit/s")
    # the same links measured by two tools: the same goodput within a margin
    assert 0.5 < npm.otp_mbps / iperf3.otp_mbps < 2.0
