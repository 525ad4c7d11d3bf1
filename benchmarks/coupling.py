"""Coupled MPTCP congestion controls (BPF LIA, OLIA, BALIA, wVegas): RFC 6356's three goals.

Run as root: ``.venv/bin/python benchmarks/coupling.py [--runs 2] [--duration 15]``. Registers
the BPF controls it needs (and unregisters exactly those at the end), brings up the three small
testbeds of ``probes/bpf_cc_coupling.py`` one after the other, and prints a markdown table, one
row per congestion control, each cell the mean of ``--runs`` runs (the single runs follow in
JSON on stderr):

- do no harm: MPTCP (2 subflows, one 6 Mbit/s bottleneck) goodput / one TCP flow's of the base CC;
- improve throughput: MPTCP goodput over two disjoint paths (6 and 3 Mbit/s) / the better path's
  single-path TCP goodput;
- balance congestion: share of the connection's bytes on the path loaded by two reno flows (two
  4 Mbit/s paths).

The bounds the tests assert (tests/probes/test_bpf_coupled.py) are printed under the table.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys

from probes import bpf_cc
from probes import bpf_cc_coupling as C

ROWS = ("lia", "olia", "balia", "wvegas", "reno", "vegas")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--ccs", nargs="*", default=list(ROWS))
    args = ap.parse_args(argv)
    tag = secrets.token_hex(2)
    res: dict[str, dict[str, list[dict]]] = {cc: {} for cc in args.ccs}
    try:
        with C.testbed(C.shared_spec(f"cbh{tag}")) as bed:
            for _ in range(args.runs):
                for cc in args.ccs:
                    r = C.do_no_harm(bed, cc, C.BASE_CC.get(cc, cc), args.duration)
                    res[cc].setdefault("harm", []).append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
        with C.testbed(C.disjoint_spec(f"cbi{tag}")) as bed:
            for _ in range(args.runs):
                for cc in args.ccs:
                    r = C.improve_throughput(bed, cc, C.BASE_CC.get(cc, cc), args.duration - 3)
                    res[cc].setdefault("improve", []).append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
        with C.testbed(C.balance_spec(f"cbb{tag}")) as bed:
            for _ in range(args.runs):
                for cc in args.ccs:
                    r = C.balance(bed, cc, args.duration)
                    res[cc].setdefault("balance", []).append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
    finally:
        bpf_cc.unload(list(C.LOADED), map_ids=dict(C.LOADED))

    def mean(cc: str, kind: str, key: str) -> float:
        return statistics.fmean(r[key] for r in res[cc][kind])

    def rng(cc: str, kind: str, key: str) -> str:
        v = [r[key] for r in res[cc][kind]]
        return f"{statistics.fmean(v):.2f} ({min(v):.2f}-{max(v):.2f})"

    print(f"{args.runs} runs x {args.duration:g} s per cell (mean, range); goodput after a "
          f"{C.WARMUP_S:g} s warm-up; {C.DELAY_MS} ms one-way delay on every path\n")
    print("| CC | base | do no harm: MPTCP / TCP | MPTCP, TCP Mbit/s | improve: MPTCP / best "
          "path | MPTCP, best TCP Mbit/s | balance: share on congested path | MPTCP Mbit/s |")
    print("|---|---|---|---|---|---|---|---|")
    for cc in args.ccs:
        print(f"| {cc} | {C.BASE_CC.get(cc, cc)} | {rng(cc, 'harm', 'ratio')} | "
              f"{mean(cc, 'harm', 'mptcp_mbps'):.2f}, {mean(cc, 'harm', 'tcp_mbps'):.2f} | "
              f"{rng(cc, 'improve', 'ratio')} | {mean(cc, 'improve', 'mptcp_mbps'):.2f}, "
              f"{mean(cc, 'improve', 'best_tcp_mbps'):.2f} | "
              f"{rng(cc, 'balance', 'frac_congested')} | {mean(cc, 'balance', 'mptcp_mbps'):.2f} |")
    print("\nbounds asserted by tests/probes/test_bpf_coupled.py: do no harm <= 1.3 (wvegas "
          "<= 1.4), uncoupled reno >= 1.15, vegas >= 1.3; improve >= 0.9; balance <= 0.95 x "
          "uncoupled reno's share (wvegas: 0.85 x)")
    return 0


if __name__ == "__main__":
    from probes.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
