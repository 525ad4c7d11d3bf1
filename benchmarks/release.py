"""Short windows against long ones: does a configuration's mean goodput in a short probe exceed
what its links carry (a release of data the receiver held for a slower subflow)?

    .venv/bin/python benchmarks/release.py benchmarks/scenarios/shared.yaml \
        --cc cubic --buffer-mib 1.67847 --durations 5 30

Per duration, FullMesh (every subflow) and PCDC on each subflow alone, one probe each with a 2 s
warm-up; prints the raw mean, the maximum flow of the subflows' stated rates, the mean as the
product stores it (`capacity.capped_mean`) and the per-second series. Measured on shared.yaml
(docs/algorithm.md, "What a campaign trusts"): FullMesh 8.8 Mbit/s in 5 s, 7.55 in 30 s, through an
8 Mbit/s uplink.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from benchmarks.oracle import probe_result, topology_of
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec
    from service.algorithm.capacity import LinkCapacity, capped_mean

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--cc", default="cubic")
    ap.add_argument("--buffer-mib", type=float, default=1.0)
    ap.add_argument("--durations", type=float, nargs="+", default=[5.0, 30.0])
    args = ap.parse_args()
    spec = load_spec(args.scenario)
    sender, receiver = (s.name for s in spec.sites)
    names = spec.subflow_names(sender, receiver)
    rates = LinkCapacity.of(topology_of(spec, sender, receiver)[0])
    bed = testbed.up(spec)
    try:
        for duration in args.durations:
            for subflows in [names, *([n] for n in names)]:
                result = probe_result(bed, sender, receiver, args.cc, subflows, names,
                                      args.buffer_mib, duration, warmup_s=2.0)
                bound = rates.max_mbps(subflows)
                series = " ".join(f"{v:.1f}" for _, v in result.goodput_series)
                print(f"{duration:>4g} s {'+'.join(subflows):<12} mean {result.goodput_mbps:6.2f}"
                      f"  links {bound:6.2f}  stored {capped_mean(result.goodput_mbps, bound):6.2f}"
                      f"  series {series}", flush=True)
    finally:
        testbed.down(spec.name)
    return 0


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
