"""A paced stream over a Wi-Fi + LTE-like pair of paths, per congestion control: the figures
seed 000 (Table 3) judges MPTCP for streaming by, measured with the paced backend.

Run as root: ``.venv/bin/python benchmarks/stream_ccs.py [--runs 3] [--duration 10]
[--ccs reno cubic bbr lia olia balia wvegas]``. The BPF controls among ``--ccs`` are registered
for the run and exactly those unregistered at the end (host-wide, like benchmarks/coupling.py).

The sender has two access links like the seed's client: "W" (Wi-Fi into an LTE router, 20
Mbit/s, 40 ms one way to the server, +-4 ms jitter) and "L" (LTE, 10 Mbit/s, 28 ms, +-2 ms),
RTTs near the seed's SRTTs of 79 and 57 ms; the server has one 100 Mbit/s link. The stream:
25 frames/s of 40,000 bytes (8 Mbit/s, the seed's throughputs were 6-11 Mbit/s), FullMesh,
autotuned buffers. Per CC the table gives the mean over runs of each probe's mean and p99 frame
delay, the head-of-line wait (mean and max: delay beyond the flow's minimum), RFC 3550 jitter,
frames lost and goodput. The seed's MPTCP-level/path-level pairs (LIA over Reno, ...) do not
exist upstream: here one control runs on every subflow.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys

from probes.base import MeasurementRequest, TrafficProfile
from probes.bpf import cc as bpf_cc
from probes.bpf import coupling as C
from probes.testbed.spec import parse_spec

FIGURES = ("delay_mean_ms", "delay_p99_ms", "hol_mean_ms", "hol_max_ms", "jitter_mean_ms",
           "lost_fraction")


def spec(name: str):
    return parse_spec({
        "name": name,
        "description": "Wi-Fi + LTE-like sender, one fast server link",
        "sites": [
            {"name": "Client", "isps": [
                {"name": "WiFi", "label": "W", "down_kbps": 20000, "up_kbps": 20000},
                {"name": "LTE", "label": "L", "down_kbps": 10000, "up_kbps": 10000}]},
            {"name": "Server", "isps": [
                {"name": "Uplink", "label": "S", "down_kbps": 100000, "up_kbps": 100000}]}],
        "defaults": {"delay_ms": 28},
        "paths": {"W-S": {"delay_ms": 40, "jitter_ms": 4}, "L-S": {"delay_ms": 28,
                                                                   "jitter_ms": 2}},
    })


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--ccs", nargs="*", default=["reno", "cubic", "bbr"])
    ap.add_argument("--rate", type=float, default=25.0)
    ap.add_argument("--size", type=int, default=40_000)
    args = ap.parse_args(argv)
    rows: dict[str, list[dict]] = {cc: [] for cc in args.ccs}
    try:
        with C.testbed(spec(f"sc{secrets.token_hex(2)}")) as bed:
            for run in range(args.runs):
                for cc in args.ccs:
                    C.ensure_loaded({cc})
                    r = bed.measure(MeasurementRequest(
                        sender="Client", receiver="Server", cc=cc, duration_s=args.duration,
                        warmup_s=1, path_manager="FullMesh",
                        profile=TrafficProfile.paced(args.rate, args.size)), backend="paced")
                    why = r.failure_reason()
                    f = r.frames.model_dump() if r.frames else {}
                    row = {"cc": cc, "run": run, "failed": why, "goodput_mbps": r.goodput_mbps,
                           **{k: f.get(k) for k in FIGURES}}
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    if why is None:
                        rows[cc].append(row)
    finally:
        bpf_cc.unload(list(C.LOADED), map_ids=dict(C.LOADED))

    def cell(cc: str, key: str, fmt: str = "{:.1f}") -> str:
        v = [r[key] for r in rows[cc] if r[key] is not None]
        return fmt.format(statistics.fmean(v)) if v else "-"

    print(f"{args.runs} runs x {args.duration:g} s per CC; stream {args.rate:g} frames/s of "
          f"{args.size} bytes ({args.rate * args.size * 8 / 1e6:g} Mbit/s); FullMesh, "
          "autotuned; W 20 Mbit/s 40 ms, L 10 Mbit/s 28 ms one way\n")
    print("| CC | ok runs | delay mean ms | delay p99 ms | HoL mean ms | HoL max ms | "
          "jitter ms | lost | goodput Mbit/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cc in args.ccs:
        print(f"| {cc} | {len(rows[cc])}/{args.runs} | {cell(cc, 'delay_mean_ms')} | "
              f"{cell(cc, 'delay_p99_ms')} | {cell(cc, 'hol_mean_ms')} | "
              f"{cell(cc, 'hol_max_ms')} | {cell(cc, 'jitter_mean_ms', '{:.2f}')} | "
              f"{cell(cc, 'lost_fraction', '{:.1%}')} | {cell(cc, 'goodput_mbps', '{:.2f}')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
