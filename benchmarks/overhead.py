"""Orchestration overhead per probe tool: (campaign wall time - probe-seconds) / probe-seconds.

    MPCOA_NETPERFMETER=/path/to/netperfmeter-2.x \\
    .venv/bin/python benchmarks/overhead.py [SCENARIO.yaml ...] [--tools iperf3,netperfmeter,paced]

Per scenario (default: uit-haw, SRL-HU, every-path) and per tool, runs, as root, a real campaign
(the product's flows in-process on a fresh SQLite file, the same executor `mpcoa demo` uses) on
a testbed of its own (the scenario's name prefixed ``ovh``, so an accuracy benchmark on the same
scenario does not collide): grid mode, `--ccs` x 2 PM x `--grid` x `--runs` plus the impact
phase, the timing rule's durations. `paced` is the paced tool, which runs a stream's probes: its
campaign asks for a `--stream-mbps` stream, whose impact probes are bulk (iperf3) and whose sweep
probes are paced.

Each probe's share of the wall time is the time from the previous probe's end (the campaign's
start for the first) to its own end: the gap between probes (the campaign's turn, the store)
plus its own run. Per tool: the sum of its probes' shares against the sum of their planned
durations (what the budget charges):

    overhead = (sum of shares - probe-seconds) / probe-seconds

split into the tool's own time (its start to its end, as stored: the tool's exchanges, the
passive side's readiness, the hygiene checks, the buffer read-back) and the gaps. The last
column is the whole campaign's (wall - probe-seconds) / probe-seconds. Prints a table and one
JSON line per (scenario, tool).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SCENARIOS = [ROOT / "probes/testbed/scenarios/uit-haw.yaml",
                     ROOT / "probes/testbed/scenarios/srl-hu.yaml",
                     ROOT / "benchmarks/scenarios/every-path.yaml"]
PREFIX = "ovh"


def own_copy(path: Path, folder: Path, prefix: str = PREFIX):
    """The scenario under a testbed name of this benchmark's own."""
    import yaml

    from probes.testbed.spec import parse_spec

    data = yaml.safe_load(path.read_text())
    data["name"] = (prefix + str(data["name"]).replace("-", ""))[:12]
    (folder / f"{data['name']}.yaml").write_text(yaml.safe_dump(data))
    return parse_spec(data)


def _utc(t: datetime) -> datetime:
    """A stored time as naive UTC (the stores give it with or without its zone)."""
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)


def tool_figures(rows, started_at: datetime) -> dict[str, dict[str, float]]:
    """Per tool: probes, probe-seconds, wall share, tool time and gaps (see the module doc)."""
    out: dict[str, dict[str, float]] = {}
    previous_end = _utc(started_at)
    for m in sorted(rows, key=lambda m: _utc(m.finished_at)):
        f = out.setdefault(m.tool, {"probes": 0, "failed": 0, "probe_s": 0.0, "share_s": 0.0,
                                    "tool_s": 0.0, "gap_s": 0.0})
        started, finished = _utc(m.started_at), _utc(m.finished_at)
        f["probes"] += 1
        f["failed"] += m.status != "ok"
        f["probe_s"] += m.duration_s
        f["share_s"] += (finished - previous_end).total_seconds()
        f["tool_s"] += (finished - started).total_seconds()
        f["gap_s"] += (started - previous_end).total_seconds()
        previous_end = finished
    return out


def run_one(spec, tool: str, args) -> dict:
    from sqlalchemy import select

    from benchmarks.oracle import topology_of
    from models import Measurement
    from service.db import session_scope
    from service.flows.campaign import dispatch
    from service.flows.campaign.plan import CampaignParameters
    from service.flows.campaign.runner import run_campaign
    from service.settings import get_settings
    from service.store import campaigns, inventory

    # this scenario's own testbed: another with the same sites (a benchmark beside this one)
    # would otherwise take its probes
    os.environ["MPCOA_TESTBED"] = spec.name
    get_settings.cache_clear()
    settings = get_settings()
    assert settings.testbed == spec.name
    sender, receiver = (s.name for s in spec.sites)
    topo, rtts = topology_of(spec, sender, receiver)
    stream = tool == "paced"
    params = CampaignParameters(
        ccs=args.ccs.split(","), buffer_grid_mib=[float(b) for b in args.grid.split(",")],
        runs=args.runs, duration_s=args.duration, mode="grid",
        objective={"kind": "stream", "bitrate_mbps": args.stream_mbps} if stream else None,
        # iperf3 is the bulk tool whose streams run on the paced tool (auto would take
        # NetPerfMeter 2.x where this host has it)
        probe_tool="iperf3" if stream else tool)
    dispatch.register_executor("inprocess", lambda *_: None)  # this script runs it
    with session_scope() as s:
        row = inventory.ensure_topology(s, spec=topo, rtts_ms=rtts)
        cid = dispatch.start_campaign(s, topology_id=row.id, params=params,
                                      reason="benchmark", settings=settings).id
    started_at = datetime.now(UTC)
    start = time.monotonic()
    state = run_campaign(cid, settings=settings)
    wall = time.monotonic() - start
    with session_scope() as s:
        c = campaigns.get_campaign(s, campaign_id=cid)
        rows = s.scalars(select(Measurement).where(Measurement.campaign_id == cid)).all()
        per_tool = tool_figures(rows, started_at)
        probe_s = sum(m.duration_s for m in rows)
        errors = sorted({(m.error or "")[:160] for m in rows if m.status != "ok"})
        return {"scenario": spec.name, "tool": tool, "state": state, "error": c.error,
                "wall_s": round(wall, 2), "probe_s": round(probe_s, 2),
                "overhead": round((wall - probe_s) / probe_s, 4) if probe_s else None,
                "per_tool": per_tool, "failed_reasons": errors}


def print_rows(results: list[dict]) -> None:
    print(f"{'scenario':<14} {'campaign':<13} {'tool':<13} {'probes':>6} {'failed':>6} "
          f"{'probe-s':>8} {'share-s':>8} {'overhead':>8} {'in tool':>8} {'between':>8} "
          f"{'campaign':>8}")
    for r in results:
        for tool, f in sorted(r["per_tool"].items()):
            p = f["probe_s"] or float("nan")
            print(f"{r['scenario']:<14} {r['tool']:<13} {tool:<13} {f['probes']:>6} "
                  f"{f['failed']:>6} {f['probe_s']:>8.1f} {f['share_s']:>8.1f} "
                  f"{(f['share_s'] - f['probe_s']) / p:>8.3f} "
                  f"{(f['tool_s'] - f['probe_s']) / p:>8.3f} {f['gap_s'] / p:>8.3f} "
                  f"{r['overhead'] if r['overhead'] is not None else float('nan'):>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenarios", nargs="*", type=Path, default=DEFAULT_SCENARIOS)
    parser.add_argument("--tools", default="iperf3,netperfmeter,paced",
                        help="comma-separated: iperf3, netperfmeter, paced")
    parser.add_argument("--ccs", default="cubic")
    parser.add_argument("--grid", default="0.05,0.2,1", help="buffers, MiB")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0,
                        help="the plan's T; the timing rule lengthens it on long paths")
    parser.add_argument("--stream-mbps", type=float, default=0.3,
                        help="the paced tool's stream (below the thinnest scenario's uplink)")
    parser.add_argument("--prefix", default=PREFIX,
                        help="of the testbeds' names: another run at once needs its own")
    args = parser.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    unknown = set(tools) - {"iperf3", "netperfmeter", "paced"}
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    folder = scratch_dir("mpcoa-overhead-")
    os.environ.update({"MPCOA_DATA_DIR": str(folder),
                       "MPCOA_DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}"})

    from probes.testbed import lifecycle as testbed
    from service.db import upgrade
    from service.settings import get_settings

    upgrade(get_settings().effective_database_url)
    results = []
    for path in args.scenarios:
        spec = own_copy(path, folder, args.prefix)
        testbed.up(spec)
        try:
            for tool in tools:
                r = run_one(spec, tool, args)
                results.append(r)
                print(json.dumps(r), flush=True)
        finally:
            testbed.down(spec.name)
    print_rows(results)


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
