"""Does one long connection switched through phases (the paper's Fig. 3) measure what separate
probes measure?

    .venv/bin/python benchmarks/phased_impact.py probes/testbed/scenarios/unis-hin.yaml \\
        --ccs cubic bbr --reps 3 --settle 3 --measure 5

Per CC and repetition, interleaved (the order alternates between repetitions): one phased run
over the impact phase's subsets (every subflow, then each subflow excluded: TP_0, TP_1..TP_n),
and one separate probe per subset with the same measurement window (duration = first settle +
measure, that settle left out as warm-up). Prints a markdown table per CC (mean and standard
deviation of each subset's goodput by both methods, their ratio, Welch's t) and one JSON line,
and takes the testbed down.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere


def separate(bed, sender, receiver, cc, allowed, names, warmup, duration) -> float:
    """One probe of the subset as a campaign runs it; retried like accuracy.py's probes."""
    from probes.base import MeasurementRequest, ProbeError

    request = MeasurementRequest(
        sender=sender, receiver=receiver, cc=cc, duration_s=duration, warmup_s=warmup,
        allowed_subflows=None if set(allowed) == set(names) else list(allowed),
        path_manager="FullMesh" if set(allowed) == set(names) else "PCDC")
    why = ""
    for _attempt in range(3):
        try:
            result = bed.measure(request)
        except ProbeError as exc:
            why = str(exc)
            continue
        if (why := result.failure_reason()) is None:
            return result.goodput_mbps
    raise RuntimeError(f"probe unusable three times: {why}")


def welch_t(a: list[float], b: list[float]) -> float | None:
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return None
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)


def label(names: list[str], allowed: list[str]) -> str:
    excluded = [n for n in names if n not in allowed]
    return "all (TP_0)" if not excluded else f"without {', '.join(excluded)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--ccs", nargs="+", default=["cubic"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--first-settle", type=float, default=None,
                    help="the first phase's settle time (slow start); default --settle")
    ap.add_argument("--measure", type=float, default=5.0)
    args = ap.parse_args()

    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec
    from probes.tools.phased_impact import TAIL_S, PhasedRequest, impact_phases, measure_phased

    spec = load_spec(args.scenario)
    sender, receiver = (s.name for s in spec.sites)
    names = spec.subflow_names(sender, receiver)
    phases = impact_phases(names)
    first = args.settle if args.first_settle is None else args.first_settle
    bed = testbed.up(spec)
    out: dict = {"scenario": args.scenario.stem, "settle_s": args.settle, "first_settle_s": first,
                 "measure_s": args.measure, "reps": args.reps, "ccs": {}}
    try:
        for cc in args.ccs:
            phased: dict[str, list[float]] = {label(names, p): [] for p in phases}
            sep: dict[str, list[float]] = {label(names, p): [] for p in phases}
            leaks, errors, wall = [], [], {"phased": 0.0, "separate": 0.0}
            probe_s = {"phased": 0.0, "separate": 0.0}
            for rep in range(args.reps):
                for method in (("phased", "separate") if rep % 2 == 0
                               else ("separate", "phased")):
                    t0 = time.monotonic()
                    if method == "phased":
                        req = PhasedRequest(sender, receiver, phases, cc=cc,
                                            settle_s=args.settle, measure_s=args.measure,
                                            first_settle_s=first)
                        res = measure_phased(bed, req)
                        probe_s["phased"] += req.duration_s + TAIL_S
                        errors.extend(res.flag_errors)
                        vals = [p.goodput_mbps for p in res.phases]
                        for p in res.phases:
                            if p.goodput_mbps is not None:
                                phased[label(names, p.allowed)].append(p.goodput_mbps)
                            leaks.extend(f"rep {rep} {label(names, p.allowed)}: {s} "
                                         f"{p.subflow_bytes.get(s)} B" for s in p.leaks)
                            if not p.sampled:  # no leak check ran for this window
                                leaks.append(f"rep {rep} {label(names, p.allowed)}: unsampled")
                    else:
                        vals = []
                        for p in phases:
                            v = separate(bed, sender, receiver, cc, p, names, first,
                                         first + args.measure)
                            probe_s["separate"] += first + args.measure
                            sep[label(names, p)].append(v)
                            vals.append(v)
                    wall[method] += time.monotonic() - t0
                    print(f"{cc} rep {rep} {method}: "
                          + " ".join("-" if v is None else f"{v:.2f}" for v in vals),
                          file=sys.stderr, flush=True)
            rows = []
            for p in phases:
                k = label(names, p)
                a, b = phased[k], sep[k]
                ma = statistics.fmean(a) if a else None
                mb = statistics.fmean(b) if b else None
                rows.append({
                    "subset": k, "phased": [round(v, 3) for v in a],
                    "separate": [round(v, 3) for v in b],
                    "phased_mean": ma and round(ma, 3), "separate_mean": mb and round(mb, 3),
                    "phased_sd": round(statistics.stdev(a), 3) if len(a) > 1 else None,
                    "separate_sd": round(statistics.stdev(b), 3) if len(b) > 1 else None,
                    "ratio": round(ma / mb, 3) if ma is not None and mb else None,
                    "welch_t": (t := welch_t(a, b)) and round(t, 2)})
            out["ccs"][cc] = {"rows": rows, "leaks": leaks, "flag_errors": errors,
                              "wall_s": {k: round(v, 1) for k, v in wall.items()},
                              "probe_s": probe_s}
            print(f"\n{cc}: phased {probe_s['phased']:.0f} probe-s / {wall['phased']:.0f} s wall,"
                  f" separate {probe_s['separate']:.0f} probe-s / {wall['separate']:.0f} s wall")
            print("| subset | phased Mbit/s (sd) | separate Mbit/s (sd) | phased/separate | t |")
            print("|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['subset']} | {r['phased_mean']} ({r['phased_sd']}) | "
                      f"{r['separate_mean']} ({r['separate_sd']}) | {r['ratio']} | "
                      f"{r['welch_t']} |")
            if leaks or errors:
                print(f"leaks: {leaks}\nflag errors: {errors}")
    finally:
        testbed.down(spec.name)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
