"""Coupled MPTCP congestion controls (BPF LIA, OLIA, BALIA, wVegas; seed 002's EWTCP and cs218):
RFC 6356's three goals.

Run as root: ``.venv/bin/python benchmarks/coupling.py [--runs 2] [--duration 15]``. Registers
the BPF controls it needs (and unregisters exactly those at the end), brings up the three small
testbeds of ``probes/bpf/coupling.py`` one after the other, and prints a markdown table, one
row per congestion control, each cell the mean of ``--runs`` runs (the single runs follow in
JSON on stderr):

- do no harm: MPTCP (2 subflows, one 6 Mbit/s bottleneck) goodput / one TCP flow's of the base CC;
- improve throughput: MPTCP goodput over two disjoint paths (6 and 3 Mbit/s) / the better path's
  single-path TCP goodput;
- balance congestion: share of the connection's bytes on the path loaded by two reno flows (two
  4 Mbit/s paths); with reno among ``--ccs``, each coupled CC's share over reno's in the same
  round, and in how many rounds it was below (the order the test asserts).

``--goals balance`` measures only that goal.

The bounds the tests assert (tests/probes/test_bpf_coupled.py) are printed under the table.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import statistics
import sys

from probes.base import CC_PATTERN
from probes.bpf import cc as bpf_cc
from probes.bpf import coupling as C

ROWS = ("lia", "olia", "balia", "wvegas", "ewtcp", "cs218", "reno", "vegas")


GOALS = ("harm", "improve", "balance")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--ccs", nargs="*", default=list(ROWS))
    ap.add_argument("--goals", nargs="*", choices=GOALS, default=list(GOALS))
    ap.add_argument("--against", default=None, metavar="CC",
                    help="do no harm against a TCP flow of this CC (e.g. cubic, Linux's default, "
                         "as a shared path's competing traffic is) instead of each control's base")
    args = ap.parse_args(argv)
    if args.against is not None and not re.fullmatch(CC_PATTERN, args.against):
        ap.error(f"--against {args.against!r}: not a congestion control name")

    def rival(cc: str) -> str:
        return args.against or C.BASE_CC.get(cc, cc)

    tag = secrets.token_hex(2)
    res: dict[str, dict[str, list[dict]]] = {cc: {} for cc in args.ccs}
    # (goal, testbed, one measurement)
    plan = {
        "harm": (C.shared_spec(f"cbh{tag}"),
                 lambda bed, cc: C.do_no_harm(bed, cc, rival(cc), args.duration)),
        "improve": (C.disjoint_spec(f"cbi{tag}"),
                    lambda bed, cc: C.improve_throughput(bed, cc, C.BASE_CC.get(cc, cc),
                                                         args.duration - 3)),
        "balance": (C.balance_spec(f"cbb{tag}"),
                    lambda bed, cc: C.balance(bed, cc, args.duration)),
    }
    try:
        for goal in args.goals:
            spec, measure = plan[goal]
            with C.testbed(spec) as bed:
                for _ in range(args.runs):
                    for cc in args.ccs:
                        r = measure(bed, cc)
                        res[cc].setdefault(goal, []).append(r)
                        print(json.dumps({"goal": goal, **r}), file=sys.stderr, flush=True)
    finally:
        bpf_cc.unload(list(C.LOADED), map_ids=dict(C.LOADED))

    def cell(cc: str, goal: str, key: str) -> str:
        v = [r[key] for r in res[cc].get(goal, [])]
        return f"{statistics.fmean(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"

    def mean(cc: str, goal: str, key: str) -> str:
        v = [r[key] for r in res[cc].get(goal, [])]
        return f"{statistics.fmean(v):.2f}" if v else "-"

    print(f"{args.runs} runs x {args.duration:g} s per cell (mean, range); goodput after a "
          f"{C.WARMUP_S:g} s warm-up; {C.DELAY_MS} ms one-way delay on every path\n")
    print("| CC | TCP flow's CC | do no harm: MPTCP / TCP | MPTCP, TCP Mbit/s | improve: MPTCP / "
          "best path | MPTCP, best TCP Mbit/s | balance: share on congested path | MPTCP Mbit/s |")
    print("|---|---|---|---|---|---|---|---|")
    for cc in args.ccs:
        print(f"| {cc} | {rival(cc)} | {cell(cc, 'harm', 'ratio')} | "
              f"{mean(cc, 'harm', 'mptcp_mbps')}, {mean(cc, 'harm', 'tcp_mbps')} | "
              f"{cell(cc, 'improve', 'ratio')} | {mean(cc, 'improve', 'mptcp_mbps')}, "
              f"{mean(cc, 'improve', 'best_tcp_mbps')} | "
              f"{cell(cc, 'balance', 'frac_congested')} | {mean(cc, 'balance', 'mptcp_mbps')} |")
    if "balance" in args.goals and "reno" in args.ccs:
        _balance_order(res, args.ccs)
    if "harm" in args.goals:
        _harm_order(res, args.ccs)
    print("\nasserted by tests/probes/test_bpf_coupled.py: do no harm <= 1.3 (wvegas <= 1.6; "
          "an outlier is measured twice more, the median judged), "
          "uncoupled reno and vegas above LIA and wVegas (the order); improve >= 0.9; "
          "balance: the order only (coupled's share on the congested path < uncoupled reno's)")
    return 0


def _balance_order(res: dict[str, dict[str, list[dict]]], ccs: list[str]) -> None:
    """Per round, each coupled CC's share on the congested path over uncoupled reno's share in
    the same round: the margin of the order the test asserts (< 1)."""
    reno = [r["frac_congested"] for r in res["reno"]["balance"]]
    print("\n| CC | share / reno's, per round: mean (min-max) | rounds below reno |")
    print("|---|---|---|")
    for cc in ccs:
        if cc == "reno":
            continue
        ratios = [r["frac_congested"] / ref
                  for r, ref in zip(res[cc]["balance"], reno, strict=True)]
        below = sum(x < 1 for x in ratios)
        print(f"| {cc} | {statistics.fmean(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"| {below}/{len(ratios)} |")


def _harm_order(res: dict[str, dict[str, list[dict]]], ccs: list[str]) -> None:
    """Per round, uncoupled's do-no-harm ratio minus its coupled counterpart's in the same
    round: the margin of the order the test asserts (> 0)."""
    pairs = [(u, c) for u, c in (("reno", "lia"), ("vegas", "wvegas")) if u in ccs and c in ccs]
    if not pairs:
        return
    print("\n| uncoupled - coupled | ratio gap per round: mean (min-max) | rounds above |")
    print("|---|---|---|")
    for u, c in pairs:
        gaps = [a["ratio"] - b["ratio"]
                for a, b in zip(res[u]["harm"], res[c]["harm"], strict=True)]
        above = sum(g > 0 for g in gaps)
        print(f"| {u} - {c} | {statistics.fmean(gaps):.2f} ({min(gaps):.2f}-{max(gaps):.2f}) "
              f"| {above}/{len(gaps)} |")


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
