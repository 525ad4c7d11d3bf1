"""The reduced campaign's wall time against its probe-seconds (issue 5).

    .venv/bin/python benchmarks/campaign.py [--scenario unis-hin] [--runs 2] [--duration 3]

Runs, as root, the campaign `mpcoa demo` runs (the kernel's CCs x 2 PM x 6 buffers x runs x T,
plus the impact phase) with the embedded executor on a fresh SQLite file, then prints:
- wall: the campaign from start to recommendation;
- probe-seconds: the sum of the probes' T (what the campaign asked the network for);
- tool time: the sum of each probe's own start-to-end (iperf3 start, handshake, T, teardown);
- overhead = (wall - probe-seconds) / wall (target < 10 %), and the part of it that is
  orchestration (wall - tool time) rather than the probe tool's own start and stop.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from service.state import state_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.scratch import scratch_dir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="unis-hin")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--duration", type=float, default=3.0)
    args = parser.parse_args()
    data = scratch_dir("mpcoa-bench-")
    os.environ.update(
        {"MPCOA_DATA_DIR": str(data), "MPCOA_DATABASE_URL": f"sqlite:///{data / 'bench.sqlite3'}"}
    )

    from sqlalchemy import select

    from cli.demo import DEMO_BUFFERS_MIB
    from models import Measurement
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec, scenario_path
    from service.algorithm.topology import TopologySpec
    from service.db import session_scope, upgrade
    from service.flows.campaign import dispatch
    from service.flows.campaign.plan import CampaignParameters, planned_probes
    from service.flows.campaign.runner import run_campaign
    from service.settings import get_settings
    from service.store import campaigns, inventory

    settings = get_settings()
    upgrade(settings.effective_database_url)
    spec = load_spec(scenario_path(args.scenario))
    local, remote = spec.sites
    topo = TopologySpec.model_validate(
        {
            role: {
                "name": site.name,
                "isps": [
                    {
                        "name": i.name,
                        "label": i.label,
                        "down_kbps": spec.rate_kbps(site.name, i.label, "down"),
                        "up_kbps": spec.rate_kbps(site.name, i.label, "up"),
                    }
                    for i in site.isps
                ],
            }
            for role, site in (("local", local), ("remote", remote))
        }
    )
    testbed.up(spec)
    try:
        ccs = sorted(testbed.available_congestion_controls())
        with session_scope() as s:
            row = inventory.ensure_topology(s, spec=topo)
            plan = planned_probes(len(row.subflows), len(ccs), 2, len(DEMO_BUFFERS_MIB), args.runs)
            params = CampaignParameters(
                ccs=ccs,
                buffer_grid_mib=DEMO_BUFFERS_MIB,
                runs=args.runs,
                duration_s=args.duration,
                probe_seconds_budget=plan * args.duration,
            )
            # This benchmark is the executor: it runs the campaign in the foreground.
            dispatch.register_executor("inprocess", lambda *_: None)
            cid = dispatch.start_campaign(
                s, topology_id=row.id, params=params, reason="benchmark", settings=settings
            ).id
        start = time.monotonic()
        state = run_campaign(cid, settings=settings)
        wall = time.monotonic() - start
        with session_scope() as s:
            c = campaigns.get_campaign(s, campaign_id=cid)
            rows = s.scalars(select(Measurement).where(Measurement.campaign_id == cid)).all()
            tool = sum((m.finished_at - m.started_at).total_seconds() for m in rows)
            probe_s = state_of(c).budget.used_s
            n = len(rows)
    finally:
        testbed.down(spec.name)
    print(
        f"scenario {args.scenario}: {len(ccs)} CCs x 2 PM x {len(DEMO_BUFFERS_MIB)} buffers x "
        f"{args.runs} runs x {args.duration:g} s + impact phase; state {state}"
    )
    print(f"probes:         {n}")
    print(f"wall:           {wall:8.1f} s")
    print(f"probe-seconds:  {probe_s:8.1f} s")
    print(f"tool time:      {tool:8.1f} s")
    print(
        f"overhead (wall - probe-seconds) / wall: {100 * (wall - probe_s) / wall:5.1f} %"
        "  (target < 10 %)"
    )
    print(
        f"  of which orchestration (wall - tool time) / wall: {100 * (wall - tool) / wall:5.1f} %"
    )
    print(f"  per probe: {(wall - probe_s) / n:.3f} s, orchestration {(wall - tool) / n:.3f} s")


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
