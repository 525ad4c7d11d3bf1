"""The userspace-PM probe against the in-kernel endpoints an apply sets, on one scenario.

    .venv/bin/python benchmarks/apply_confirm.py probes/testbed/scenarios/unis-hin.yaml \\
        --subset K-C,K-D --cc reno --buffer-mib 0.5 [--runs 2] [--duration 8]

Per run, back to back: the campaign's probe (iperf3 under the userspace path manager, the
subset's other subflows excluded as backup, SO_SNDBUF/SO_RCVBUF = the buffer), then the
answer applied to the site namespaces (`probes.site.apply`: endpoints, limits, CC, buffers) and
a plain MPTCP application measured twice on the kernel's own path manager: autotuned (what an
application that sets nothing gets) and with SO_SNDBUF = the buffer (one that sets its own);
then the sites rolled back. Prints a table and one JSON line; the testbed is taken down.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.oracle import probe
from benchmarks.scratch import scratch_dir

MIB = 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--subset", default="all", help="subflows carrying data, comma-separated")
    ap.add_argument("--cc", default="reno", help="a CC the host allows in namespaces")
    ap.add_argument("--buffer-mib", type=float, default=0.5)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=8.0)
    args = ap.parse_args()

    from probes.site import apply as siteapply
    from probes.site import config as sc
    from probes.site import mptcpapp
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec
    from probes.tools.ports import choose_port_triple
    from service.algorithm.topology import TopologySpec
    from service.flows.applying import site_plan

    spec = load_spec(args.scenario)
    sender, receiver = (s.name for s in spec.sites)
    names = spec.subflow_names(sender, receiver)
    subset = names if args.subset == "all" else args.subset.split(",")
    keep = {"name", "label", "down_kbps", "up_kbps"}
    topo = TopologySpec.model_validate({
        side: {"name": s.name, "isps": [isp.model_dump(include=keep) for isp in s.isps]}
        for side, s in zip(("local", "remote"), spec.sites, strict=True)})
    root = scratch_dir("mpcoa-apply-bench-")
    host = sc.read_state(None)
    bed = testbed.up(spec)
    rows: dict[str, list[float]] = {"userspace PM probe": [], "in-kernel, autotuned": [],
                                    "in-kernel, SO_SNDBUF": []}
    seen: list[dict] = []
    try:
        plan = site_plan.plan_sites(
            topo, opm="FullMesh" if subset == names else "PCDC", occ=args.cc,
            obs_mib=args.buffer_mib, subflows_used=subset, standby_subflows=[],
            local_addrs={lk.label: lk.address for lk in bed.site_links(sender)},
            remote_addrs={lk.label: lk.address for lk in bed.site_links(receiver)},
            builtin_ccs=set(sc.read_state(None)["available_ccs"]))
        warmup = min(3.0, args.duration / 3)
        for _run in range(args.runs):
            rows["userspace PM probe"].append(
                probe(bed, sender, receiver, "PCDC" if subset != names else "FullMesh", args.cc,
                      subset, names, args.buffer_mib, args.duration))
            for site in plan.sites:
                ns = bed.ns(site.site)
                siteapply.apply(site_plan.desired_state(site, sc.read_state(ns)), ns=ns,
                                root=root)
            try:
                for label, sndbuf in (("in-kernel, autotuned", None),
                                      ("in-kernel, SO_SNDBUF", round(args.buffer_mib * MIB))):
                    got = mptcpapp.confirm(
                        sender_ns=bed.ns(sender), receiver_ns=bed.ns(receiver),
                        source=plan.connect["source"], destination=plan.connect["destination"],
                        port=choose_port_triple([bed.ns(sender), bed.ns(receiver)]),
                        seconds=args.duration, warmup_s=warmup, sndbuf=sndbuf)
                    rows[label].append(got["goodput_mbps"])
                    seen.append({k: got[k] for k in ("cc", "peak_subflows", "fallback")})
            finally:
                for site in plan.sites:
                    siteapply.rollback(ns=bed.ns(site.site), root=root)
            print(" ".join(f"{k}={v[-1]:.3f}" for k, v in rows.items()), flush=True)
    finally:
        testbed.down(spec.name)
    means = {k: statistics.fmean(v) for k, v in rows.items() if v}
    upm = means.get("userspace PM probe")
    for k, v in means.items():
        ratio = f"  x{v / upm:.3f}" if upm else ""
        print(f"{k:22s} {v:8.3f} Mbit/s{ratio}")
    after = sc.read_state(None)
    print(json.dumps({
        "scenario": spec.name, "subset": subset, "used_in_kernel": plan.used,
        "dropped": plan.dropped, "cc": args.cc, "buffer_mib": args.buffer_mib,
        "runs": args.runs, "duration_s": args.duration,
        "mbps": {k: [round(x, 3) for x in v] for k, v in rows.items()},
        "kernel_over_userspace": {k: round(v / upm, 3) for k, v in means.items() if upm},
        "seen": seen,
        "host_unchanged": (after["sysctls"], after["endpoints"], after["limits"])
        == (host["sysctls"], host["endpoints"], host["limits"]),
    }))


if __name__ == "__main__":
    main()
