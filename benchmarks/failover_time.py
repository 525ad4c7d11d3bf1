"""How fast a transfer survives a selected ISP failing: the failover watcher (a link that goes
down) and the kernel's stale-subflow rule (an ISP that fails upstream while the link stays up).

    .venv/bin/python benchmarks/failover_time.py [--repeats 5] [--hold-s 3]
        [--cuts link route] [--stale-loss-cnt 1 2 4 8] [--watcher on off]

A 2 x 2 testbed: site A with ISPs U (8 Mbit/s) and K (4), site B with C (20) and D (2). The
answer uses U (U-C, U-D) with K standing by (its subflows established as backup); it is applied
to both namespaces (`probes.site.apply`) and, with `--watcher on`, A's watcher runs as this
process's child (`probes.site.failover --parent-pid`, as a site worker starts it). Per repeat: a
plain MPTCP transfer A -> B; U's ISP is cut in the testbed's core after a few seconds and
returns later; then the sites are rolled back. Two cuts:
- `link`: U's link in the core is set down; the site's end loses its carrier (a modem gone);
- `route`: the core drops every packet from and to U's address (`ip rule ... blackhole`), the
  link stays up: only the kernel's own rule can notice (a subflow is stale after
  `net.mptcp.stale_loss_cnt` retransmission intervals, and the scheduler moves to backup).
Each (cut, `stale_loss_cnt`, watcher) cell runs `--repeats` times; `net.mptcp.stale_loss_cnt`
is set in both site namespaces (a per-namespace setting: the host's is untouched) and put back
by the rollback's end. Printed per repeat and per cell as median / max: the time from the cut
until the goodput is back at >= 80 % of the surviving 4 Mbit/s (first 1-second window, stepped
by 0.2 s), cut -> the watcher's `failover` line, link return -> `restored` (includes the hold
time), the goodput while cut (from cut + 5 s to the return) and after the restore, and the
sender's `SubflowStale` / `SubflowRecover` counter rises. The testbed is taken down and the link
restored even on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from benchmarks.scratch import scratch_dir  # noqa: E402 (after the path line above)

SITES = {"A": [("U", 8000), ("K", 4000)], "B": [("C", 20000), ("D", 2000)]}
SURVIVING_MBPS = 4.0  # K's uplink
BEFORE_S, CUT_S, AFTER_S = 6.0, 10.0, 6.0
STALE = "net.mptcp.stale_loss_cnt"
RULE_PREFS = (50, 51)  # before the core's own rules (the delay line's, at the kernel's defaults)


def _site(name: str) -> dict:
    return {"name": name, "isps": [{"name": f"isp{lb}", "label": lb, "down_kbps": kb,
                                    "up_kbps": kb} for lb, kb in SITES[name]]}


def _interrupted(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _cut(bed, link, how: str, down: bool, check: bool = True) -> None:
    """Cut U's ISP (`down`) or bring it back, as `how` says (the module's docstring)."""
    core = ["ip", "-n", bed.core_ns]
    if how == "link":
        subprocess.run([*core, "link", "set", link.core_dev, "down" if down else "up"],
                       check=check)
        return
    rules = ((RULE_PREFS[0], ["iif", link.core_dev]), (RULE_PREFS[1], ["to", link.address]))
    for pref, match in rules:
        if down:
            subprocess.run([*core, "rule", "add", "pref", str(pref), *match, "blackhole"],
                           check=check)
        else:  # absent already (a cut that failed half-way) is fine
            subprocess.run([*core, "rule", "del", "pref", str(pref)], check=False,
                           stderr=subprocess.DEVNULL)


def one_repeat(bed, plan, root: Path, hold_s: float, *, how: str = "link",
               watch: bool = True) -> dict:
    from probes.site import apply as siteapply
    from probes.site import config as sc
    from probes.site import mptcpapp
    from probes.tools import mptcp_counters
    from probes.tools.ports import choose_port_triple
    from service.flows.applying import site_plan as ap

    sender = plan.sites[0]
    for s in plan.sites:
        siteapply.apply(ap.desired_state(s, sc.read_state(bed.ns(s.site))), ns=bed.ns(s.site),
                        root=root)
    ids = {e.label: e.id for e in sender.endpoints}
    cfg, events = root / "watch.json", root / "events.jsonl"
    cfg.write_text(json.dumps({"used": [ids["U"]], "standbys": sender.standby_endpoints,
                               "hold_s": hold_s}))
    events.write_text("")
    watcher = subprocess.Popen(
        [sys.executable, "-m", "probes.site.failover", "--ns", bed.ns("A"), "--config", str(cfg),
         "--events", str(events), "--parent-pid", str(os.getpid())],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True) if watch else None
    link = next(lk for lk in bed.site_links("A") if lk.label == "U")
    before = mptcp_counters.read_counters([bed.ns("A")])[0]
    seconds = BEFORE_S + CUT_S + hold_s + AFTER_S
    result: dict = {}
    transfer = threading.Thread(target=lambda: result.update(mptcpapp.confirm(
        sender_ns=bed.ns("A"), receiver_ns=bed.ns("B"), source=plan.connect["source"],
        destination=plan.connect["destination"],
        port=choose_port_triple([bed.ns("A"), bed.ns("B")]), seconds=seconds, warmup_s=2)),
        daemon=True)
    try:
        deadline = time.monotonic() + 10
        while watcher is not None and "watching" not in events.read_text():  # it polls now
            if watcher.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the watcher did not start")
            time.sleep(0.05)
        transfer.start()
        time.sleep(BEFORE_S)  # the timeline: a transfer under way, then the cut
        cut_at = time.time()
        _cut(bed, link, how, down=True)
        time.sleep(CUT_S)
        back_at = time.time()
        _cut(bed, link, how, down=False)
        transfer.join(seconds + 60)
        deadline = time.monotonic() + hold_s + 10
        while (watcher is not None and "restored" not in events.read_text()
               and time.monotonic() < deadline):
            time.sleep(0.1)
    finally:
        _cut(bed, link, how, down=False, check=False)
        if watcher is not None:
            if watcher.poll() is None:
                watcher.send_signal(signal.SIGTERM)
            watcher.wait(15)
        after = mptcp_counters.read_counters([bed.ns("A")])[0]
        for s in plan.sites:
            siteapply.rollback(ns=bed.ns(s.site), root=root)
    if not result:
        raise RuntimeError("the transfer did not finish")
    log = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    fail = next((e["at"] for e in log if e["kind"] == "failover"), None)
    restored = next((e["at"] for e in log if e["kind"] == "restored"), None)
    series, t0 = result["series"], result["t0_wall"]
    c = cut_at - t0
    recovered = next((0.2 * i for i in range(int(CUT_S / 0.2))
                      if mptcpapp.goodput_mbps(series, c + 0.2 * i, c + 0.2 * i + 1)
                      >= 0.8 * SURVIVING_MBPS), None)
    after_from = (restored or back_at + hold_s) - t0 + 1
    return {
        "recovered_s": recovered,
        "failover_event_s": None if fail is None else fail - cut_at,
        "restored_event_s": None if restored is None else restored - back_at,
        "while_cut_mbps": mptcpapp.goodput_mbps(series, c + 5, back_at - t0),
        "after_restore_mbps": mptcpapp.goodput_mbps(series, after_from),
        "before_cut_mbps": mptcpapp.goodput_mbps(series, 2, c),
        "stale": after.get("SubflowStale", 0) - before.get("SubflowStale", 0),
        "recovered": after.get("SubflowRecover", 0) - before.get("SubflowRecover", 0),
    }


def _stat(values: list) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "none"
    return f"median {statistics.median(got):.2f}, max {max(got):.2f}" + (
        f" ({len(values) - len(got)} missing)" if len(got) < len(values) else "")


def _cell_report(cell: dict) -> str:
    runs = cell["repeats"]
    return (f"cut {cell['cut']}, stale_loss_cnt {cell['stale_loss_cnt']}, watcher "
            f"{'on' if cell['watcher'] else 'off'}: recovered "
            f"{_stat([r['recovered_s'] for r in runs])} s (each: "
            + ", ".join("none" if r["recovered_s"] is None else f"{r['recovered_s']:.2f}"
                        for r in runs)
            + f"); failover event {_stat([r['failover_event_s'] for r in runs])} s; while cut "
            f"{statistics.median(r['while_cut_mbps'] for r in runs):.2f} Mbit/s; after "
            f"{statistics.median(r['after_restore_mbps'] for r in runs):.2f}; stale "
            f"{[r['stale'] for r in runs]}, recover {[r['recovered'] for r in runs]}")


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--repeats", type=int, default=5, choices=range(1, 51), metavar="1..50")
    ap_.add_argument("--hold-s", type=float, default=3.0)
    ap_.add_argument("--cuts", nargs="+", choices=("link", "route"), default=["link"])
    ap_.add_argument("--stale-loss-cnt", nargs="+", type=int, choices=range(1, 33),
                     metavar="1..32", default=None,
                     help="net.mptcp.stale_loss_cnt values to try (default: the testbed's)")
    ap_.add_argument("--watcher", nargs="+", choices=("on", "off"), default=["on"])
    args = ap_.parse_args()
    if not 0.5 <= args.hold_s <= 60:
        ap_.error("--hold-s: 0.5..60 s")

    from probes.netns import sysctl_get, sysctl_set
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import parse_spec
    from service.algorithm.topology import TopologySpec
    from service.flows.applying import site_plan as ap

    signal.signal(signal.SIGTERM, _interrupted)
    name = f"fo{secrets.token_hex(3)}"
    spec = parse_spec({"name": name, "sites": [_site("A"), _site("B")],
                       "defaults": {"delay_ms": 10}})
    root = scratch_dir("mpcoa-failover-bench-")
    cells: list[dict] = []
    try:
        bed = testbed.up(spec)
        stock = sysctl_get(bed.ns("A"), STALE)
        topo = TopologySpec.model_validate({"local": _site("A"), "remote": _site("B")})
        plan = ap.plan_sites(
            topo, opm="PCDC", occ="reno", obs_mib=0.5, subflows_used=["U-C", "U-D"],
            standby_subflows=["K-C", "K-D"],
            local_addrs={lk.label: lk.address for lk in bed.site_links("A")},
            remote_addrs={lk.label: lk.address for lk in bed.site_links("B")},
            builtin_ccs={"reno", "cubic", "bbr"})
        for how in args.cuts:
            for stale in args.stale_loss_cnt or [int(stock or 4)]:
                for watch in args.watcher:
                    for site in ("A", "B"):
                        sysctl_set(bed.ns(site), {STALE: stale})
                    cell = {"cut": how, "stale_loss_cnt": stale, "watcher": watch == "on",
                            "repeats": []}
                    for n in range(args.repeats):
                        run = one_repeat(bed, plan, root, args.hold_s, how=how,
                                         watch=watch == "on")
                        cell["repeats"].append(run)
                        print(f"{how} stale {stale} watcher {watch} repeat {n + 1}: " + ", ".join(
                            f"{k} {v:.2f}" if v is not None else f"{k} none"
                            for k, v in run.items()), flush=True)
                    cells.append(cell)
    finally:
        testbed.down(name)
    print(f"\nfailover time, {args.repeats} repeats, hold {args.hold_s:g} s "
          f"(A: U 8 + K 4 Mbit/s; U used, K standing by; U cut in the core for {CUT_S:g} s; "
          f"recovered: goodput >= 80 % of the surviving {SURVIVING_MBPS:g} Mbit/s)")
    for cell in cells:
        print(_cell_report(cell))
    print(json.dumps({"cells": cells, "hold_s": args.hold_s, "cut_s": CUT_S}))


if __name__ == "__main__":
    main()
