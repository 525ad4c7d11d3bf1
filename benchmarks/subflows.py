"""Each subflow alone against all of them: what a thin subflow costs MPTCP on this kernel.

    .venv/bin/python benchmarks/subflows.py probes/testbed/scenarios/srl-hu.yaml \\
        [--cc bbr] [--buffer-mib 1]

Brings the scenario up, measures PCDC over every single subflow and FullMesh over all of them
(`--runs` x `--duration` s each, the same probe and checks as `accuracy.py`), prints a table and
one JSON line, and takes the testbed down. A single subflow far above FullMesh is the
head-of-line blocking behind thin subflows that `docs/testbed.md` describes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.oracle import probe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--cc", default="bbr")
    ap.add_argument("--buffer-mib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=6.0)
    args = ap.parse_args()

    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec

    spec = load_spec(args.scenario)
    sender, receiver = (s.name for s in spec.sites)
    names = spec.subflow_names(sender, receiver)
    bed = testbed.up(spec)
    rows: dict[str, float | None] = {}
    try:
        for label, subset in [*((n, [n]) for n in names), ("FullMesh", names)]:
            pm = "FullMesh" if subset == names else "PCDC"
            try:
                rows[label] = statistics.fmean(
                    probe(bed, sender, receiver, pm, args.cc, subset, names, args.buffer_mib,
                          args.duration)
                    for _ in range(args.runs)
                )
            except RuntimeError as exc:  # unusable three times: said, not hidden
                print(f"{label}: {exc}")
                rows[label] = None
            shown = "unusable" if rows[label] is None else f"{rows[label]:.3f} Mbit/s"
            print(f"{label:10s} {shown}", flush=True)
    finally:
        testbed.down(spec.name)
    print(json.dumps({"scenario": spec.name, "cc": args.cc, "buffer_mib": args.buffer_mib,
                      "runs": args.runs, "duration_s": args.duration,
                      "mbps": {k: None if v is None else round(v, 3) for k, v in rows.items()}}))


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
