"""Testbed fidelity: does the emulated testbed deliver the configured rates and delays?

Run as root: ``.venv/bin/python benchmarks/testbed_fidelity.py [--duration 10]``. Prints
markdown tables:

1. single-path TCP goodput (plain iperf3, cubic, kernel autotuning up to 64 MiB, bottleneck queue
   of one BDP) against the configured rate at 10/50/100 Mbit/s x 10/50/150 ms one-way delay;
   steady state = the receiver's 1 s intervals after the first ``--warmup`` seconds;
2. measured RTT (ping, idle) against the configured 2 x one-way delay;
3. what the delay line adds while it carries 100 Mbit/s (ping on a second, idle path that shares
   the delay line with a saturating 100 Mbit/s flow);
4. MPTCP aggregate goodput of a 2 x 2 topology against its min-cut capacity (iperf3 backend).

Targets (issue 3): >= 90 % of the rate, RTT within 5 % or 1 ms, < 0.5 ms added at 100 Mbit/s.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import statistics
import subprocess
import time

from probes.base import MeasurementRequest
from probes.netns import in_ns
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import parse_spec


def spec_1x1(name: str, rate_kbps: float, delay_ms: float, extra_isp: bool = False):
    a_isps = [{"name": "L", "label": "L", "down_kbps": rate_kbps, "up_kbps": rate_kbps}]
    b_isps = [{"name": "R", "label": "R", "down_kbps": rate_kbps, "up_kbps": rate_kbps}]
    if extra_isp:  # a second, idle path P-Q that shares only the delay line with L-R
        a_isps.append({"name": "P", "label": "P", "down_kbps": 10000, "up_kbps": 10000})
        b_isps.append({"name": "Q", "label": "Q", "down_kbps": 10000, "up_kbps": 10000})
    return parse_spec(
        {
            "name": name,
            "sites": [
                {"name": "A", "isps": a_isps},
                {"name": "B", "isps": b_isps},
            ],
            "defaults": {"delay_ms": delay_ms},
        }
    )


def iperf3_tcp(bed, duration: int, warmup: float, cc: str = "cubic", bind: str | None = None):
    """Plain single-path TCP; returns (total Mbit/s, steady-state Mbit/s)."""
    srv = subprocess.Popen(
        in_ns(bed.ns("B"), ["iperf3", "-s", "-1", "-J", "-p", "5999"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    cmd = ["iperf3", "-c", "10.2.0.1", "-p", "5999", "-t", str(duration), "-J", "-C", cc]
    if bind:
        cmd += ["-B", bind]
    subprocess.run(
        in_ns(bed.ns("A"), cmd), capture_output=True, text=True, check=True, timeout=duration + 30
    )
    out, _ = srv.communicate(timeout=15)
    data = json.loads(out)
    total = data["end"]["sum_received"]["bits_per_second"] / 1e6
    steady = [
        iv["sum"]["bits_per_second"] / 1e6
        for iv in data["intervals"]
        if iv["sum"]["start"] >= warmup and iv["sum"]["seconds"] > 0.5
    ]
    return total, statistics.mean(steady) if steady else float("nan")


def ping_rtts(ns: str, src: str, dst: str, count: int = 20, interval: float = 0.05) -> list[float]:
    out = subprocess.run(
        in_ns(ns, ["ping", "-c", str(count), "-i", str(interval), "-I", src, dst]),
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)][1:]  # first one pays ARP


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--rates", default="10,50,100", help="Mbit/s")
    ap.add_argument("--delays", default="10,50,150", help="one-way ms")
    ap.add_argument("--sections", default="1,3,4", help="which tables (1 covers 1-2)")
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",")]
    delays = [float(x) for x in args.delays.split(",")]
    tag = secrets.token_hex(2)

    if "1" in args.sections:
        print("## 1-2. Single-path TCP (cubic) and RTT\n")
        print(
            "| rate Mbit/s | one-way ms | goodput total | steady state | % of rate | "
            "RTT configured | RTT min / avg measured | added avg ms | within 5 % or 1 ms |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for d in delays:
            for r in rates:
                name = f"bf{tag}{int(r)}x{int(d)}"
                bed = tbmod.up(spec_1x1(name, r * 1000, d))
                try:
                    rtts = ping_rtts(bed.ns("A"), "10.1.0.1", "10.2.0.1")
                    total, steady = iperf3_tcp(bed, args.duration, args.warmup)
                finally:
                    tbmod.down(name)
                conf = 2 * d
                avg = statistics.mean(rtts)
                ok = abs(avg - conf) <= max(0.05 * conf, 1.0)
                print(
                    f"| {r:g} | {d:g} | {total:.2f} | {steady:.2f} | {100 * steady / r:.1f} % | "
                    f"{conf:g} | {min(rtts):.2f} / {avg:.2f} | {avg - conf:.2f} | "
                    f"{'yes' if ok else 'NO'} |",
                    flush=True,
                )

    if "3" in args.sections:
        print("\n## 3. Delay line under 100 Mbit/s load\n")
        name = f"bl{tag}"
        bed = tbmod.up(spec_1x1(name, 100_000, 10, extra_isp=True))
        try:
            idle = ping_rtts(bed.ns("A"), "10.1.1.1", "10.2.1.1", count=30)
            srv = subprocess.Popen(
                in_ns(bed.ns("B"), ["iperf3", "-s", "-1", "-p", "5998"]),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)
            cli = subprocess.Popen(
                in_ns(
                    bed.ns("A"),
                    ["iperf3", "-c", "10.2.0.1", "-p", "5998", "-t", "8", "-B", "10.1.0.1", "-J"],
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            time.sleep(3)
            loaded = ping_rtts(bed.ns("A"), "10.1.1.1", "10.2.1.1", count=40)
            out, _ = cli.communicate(timeout=30)
            srv.wait(timeout=10)
            load = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
            stats = bed.delayline_stats()
        finally:
            tbmod.down(name)
        print("| condition | load Mbit/s | RTT min / avg / max ms | added vs 20 ms (avg) |")
        print("|---|---|---|---|")
        print(
            f"| idle | 0 | {min(idle):.2f} / {statistics.mean(idle):.2f} / {max(idle):.2f} | "
            f"{statistics.mean(idle) - 20:.2f} |"
        )
        print(
            f"| 100 Mbit/s flow on the other path | {load:.1f} | {min(loaded):.2f} / "
            f"{statistics.mean(loaded):.2f} / {max(loaded):.2f} | "
            f"{statistics.mean(loaded) - 20:.2f} |"
        )
        print(f"\ndelay line counters: {stats}")

    if "4" in args.sections:
        print("\n## 4. MPTCP 2 x 2 aggregate vs min-cut\n")
        name = f"bm{tag}"
        spec = parse_spec(
            {
                "name": name,
                "sites": [
                    {
                        "name": "A",
                        "isps": [
                            {"name": "U", "label": "U", "down_kbps": 40000, "up_kbps": 40000},
                            {"name": "T", "label": "T", "down_kbps": 20000, "up_kbps": 20000},
                        ],
                    },
                    {
                        "name": "B",
                        "isps": [
                            {"name": "D", "label": "D", "down_kbps": 30000, "up_kbps": 30000},
                            {"name": "O", "label": "O", "down_kbps": 20000, "up_kbps": 20000},
                        ],
                    },
                ],
                "defaults": {"delay_ms": 20},
                "paths": {"T-O": {"delay_ms": 40}},
            }
        )
        cap = spec.capacity_kbps("A", "B") / 1000
        bed = tbmod.up(spec)
        print(
            "| cc | min-cut Mbit/s | goodput total | steady state | % of min-cut | subflows | "
            "per-subflow MB |"
        )
        print("|---|---|---|---|---|---|---|")
        try:
            for cc in ("cubic", "reno", "bbr"):
                r = bed.measure(
                    MeasurementRequest(sender="A", receiver="B", cc=cc, duration_s=args.duration)
                )
                steady = [
                    v for t, v in r.goodput_series if t > args.warmup + 1 and t <= args.duration
                ]
                st = statistics.mean(steady) if steady else float("nan")
                per = ", ".join(f"{k} {v / 1e6:.1f}" for k, v in sorted(r.subflow_bytes.items()))
                print(
                    f"| {cc} | {cap:g} | {r.goodput_mbps:.2f} | {st:.2f} | "
                    f"{100 * st / cap:.1f} % | "
                    f"{r.subflow_count}{'' if r.mptcp_ok else ' (FALLBACK)'} | {per} |",
                    flush=True,
                )
        finally:
            tbmod.down(name)
    return 0


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
