"""PCDC's subflows for a stream: chosen by bulk goodput (before) or by p99 frame delay (after).

    .venv/bin/python benchmarks/stream_subflows.py SCENARIO.yaml --stream-mbps R [--cc cubic]

Per scenario (a testbed file, as for `benchmarks/stream_accuracy.py`):
1. **bulk selection**: the product's selection (`algorithm.selection`, the settings a campaign
   gives it: δ/2 for `min_gain` and `negligible`, the stated rates, the RTTs) driven by bulk
   iperf3 probes at autotuned buffers, as the selection phase runs them for a bulk objective --
   and, before paced selection probes, for a stream one too;
2. **stream selection**: the same rules on paced probes of the stream
   (`algorithm.selection_stream`, `phases.selection_stream`);
3. **fresh probes**: both chosen subsets, paced, interleaved, `--fresh-runs` each.

Prints one JSON line per scenario: scenario, stream, cc, delta, per side (`bulk_selection`,
`stream_selection`)
the chosen `subset`, its `probes`, its `path` (decision, subset, and what it weighed), the fresh
runs' `fresh_p99_ms` (mean, and per run) and whether they carried the stream; `p99_ratio` =
the bulk subset's fresh p99 over the stream subset's (above 1: the stream selection's path
holds frames back less); `probe_seconds`; `wall_s`. Keep it small on a busy machine: one CC,
short probes.

The goals, judged over `--rounds` rounds of each scenario (one JSON line `{"verdict": ...}` at
the end; exit status 1 when one does not hold): `--expect-bulk` / `--expect-stream` name the
subsets the two selections should choose (in a majority of rounds), `--min-p99-ratio` the
least median `p99_ratio`. For benchmarks/scenarios/lossy-path.yaml (the test suite's lossy
bed; it checks only that the stream selection drops the lossy path, the margins are judged
here, where the rounds are enough and a loaded machine cannot fail a CI run):

    .venv/bin/python benchmarks/stream_subflows.py benchmarks/scenarios/lossy-path.yaml \
        --stream-mbps 3 --frame-rate 25 --duration 4 --rounds 3 \
        --expect-bulk F-U W-U --expect-stream F-U --min-p99-ratio 1.5
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.oracle import probe, run_scenarios, timed
from benchmarks.stream_accuracy import Bench, Cell, mean_p99, stream_objective
from service.algorithm.capacity import LinkCapacity
from service.algorithm.selection import SelectionResult, SelectionState, next_probes, result
from service.algorithm.selection_stream import estimate_p99, stream_state
from service.algorithm.stream_choice import StreamRun, carries

MAX_PROBES = 40  # a selection that asks for more than this on a few subflows is a bug


def select(names: Sequence[str], make_state: Callable, measure: Callable, log
           ) -> tuple[SelectionResult, int]:
    """Drive a selection to its end: ask it for the next subset, measure it, until complete."""
    runs: dict[frozenset, list] = {}
    failures: dict[frozenset, int] = {}
    for count in range(MAX_PROBES + 1):
        state = make_state(runs, failures)
        wanted = next_probes(state)
        if not wanted:
            return result(state), count
        subset = wanted[0]
        ordered = [n for n in names if n in subset]
        try:
            value = measure(ordered)
        except RuntimeError as exc:  # unusable three times: a failed selection probe
            log(f"    {'+'.join(ordered)}: {exc}")
            failures[subset] = failures.get(subset, 0) + 1
            continue
        runs.setdefault(subset, []).append(value)
        log(f"    {'+'.join(ordered)}: {value}")
    raise RuntimeError(f"the selection asked for more than {MAX_PROBES} probes")


def bulk_selection(b: Bench, cc: str, delta: float, log) -> tuple[SelectionResult, int]:
    def make(runs, failures):
        return SelectionState(b.names, runs, failures, cc=cc, capacity=LinkCapacity.of(b.topo),
                              negligible=delta / 2, min_gain=delta / 2, rtts_ms=b.rtts)

    def measure(subset):
        b.bulk_seconds += timed(b.spec, b.sender, b.receiver, subset, 0.0, b.duration)[0]
        return probe(b.bed, b.sender, b.receiver, "PCDC" if len(subset) < len(b.names)
                     else "FullMesh", cc, subset, b.names, 0.0, b.duration)

    return select(b.names, make, measure, log)


def stream_selection(b: Bench, cc: str, delta: float, rate: float, max_loss: float, log
                     ) -> tuple[SelectionResult, int]:
    def make(runs, failures):
        return stream_state(b.names, runs, failures, rate_mbps=rate, max_loss=max_loss, cc=cc,
                            negligible=delta / 2, min_gain=delta / 2, rtts_ms=b.rtts)

    def measure(subset):
        run = b.probe(Cell("PCDC", cc, tuple(subset), 0.0), b.duration)
        if run.p99_ms is None and run.goodput_mbps == 0.0:
            raise RuntimeError("no frame arrived")
        return run

    return select(b.names, make, measure, log)


def path_of(res: SelectionResult, by_delay: bool) -> list[dict]:
    out = []
    for step in res.path:
        row = {"decision": step.decision, "subset": list(step.subset),
               "subflow": step.subflow, "rival": list(step.rival or [])}
        if by_delay:
            row["p99_ms"] = _round(estimate_p99(step.estimate)["p99_ms"])
        else:
            row["goodput_mbps"] = _round(step.estimate.mean_mbps)
        if step.gain is not None:
            row["gain"] = _round(step.gain.fraction, 4)
        out.append(row)
    return out


def scenario(path: Path, args, log) -> dict:
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec

    started = time.monotonic()
    objective = stream_objective(args)
    rate, max_loss = objective.rate_mbps, objective.loss_allowed
    spec = load_spec(path)
    sender, receiver = (s.name for s in spec.sites)
    bed = testbed.up(spec)
    try:
        b = Bench(bed, spec, sender, receiver, objective, log)
        b.duration, b.bulk_seconds = args.duration, 0.0
        log(f"  bulk selection ({args.cc})")
        bulk, bulk_probes = bulk_selection(b, args.cc, args.delta, log)
        bulk_seconds = b.bulk_seconds
        log(f"  stream selection ({args.cc})")
        before = b.seconds
        stream, stream_probes = stream_selection(b, args.cc, args.delta, rate, max_loss, log)
        stream_seconds = b.seconds - before
        fresh: dict[str, list[StreamRun]] = {"bulk": [], "stream": []}
        cells = {"bulk": Cell("PCDC", args.cc, bulk.subset, 0.0),
                 "stream": Cell("PCDC", args.cc, stream.subset, 0.0)}
        for k in range(args.fresh_runs):  # interleaved: drift hits both alike
            for side in (("bulk", "stream") if k % 2 == 0 else ("stream", "bulk")):
                fresh[side].append(b.probe(cells[side], args.duration))
                log(f"  fresh {side} {'+'.join(cells[side].subflows)}: {fresh[side][-1]}")
    finally:
        testbed.down(spec.name)
    p99 = {side: mean_p99(runs) for side, runs in fresh.items()}
    sides = {}
    for side, res, probes, seconds in (("bulk", bulk, bulk_probes, bulk_seconds),
                                       ("stream", stream, stream_probes, stream_seconds)):
        sides[f"{side}_selection"] = {
            "subset": list(res.subset), "settled": res.settled, "probes": probes,
            "probe_seconds": round(seconds, 1), "path": path_of(res, side == "stream"),
            "fresh_p99_ms": _round(p99[side]),
            "fresh_runs_p99_ms": [_round(r.p99_ms) for r in fresh[side]],
            "fresh_goodput_mbps": _round(statistics.fmean(r.goodput_mbps for r in fresh[side])),
            "fresh_carries": carries(fresh[side], rate, max_loss)}
    ratio = (p99["bulk"] / p99["stream"] if math.isfinite(p99["stream"]) and p99["stream"] > 0
             else None)
    return {"scenario": path.stem, "stream": objective.key(), "rate_mbps": round(rate, 4),
            "cc": args.cc, "delta": args.delta, "duration_s": args.duration,
            "fresh_runs": args.fresh_runs, **sides,
            "p99_ratio": _round(ratio, 3) if ratio is not None and math.isfinite(ratio) else None,
            "wall_s": round(time.monotonic() - started, 1)}


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="+", type=Path)
    ap.add_argument("--stream-mbps", type=float, required=True)
    ap.add_argument("--frame-rate", type=float, default=None)
    ap.add_argument("--cc", default="cubic")
    ap.add_argument("--delta", type=float, default=0.07)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--fresh-runs", type=int, default=4)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--expect-bulk", nargs="+", default=None, metavar="SUBFLOW")
    ap.add_argument("--expect-stream", nargs="+", default=None, metavar="SUBFLOW")
    ap.add_argument("--min-p99-ratio", type=float, default=None)
    args = ap.parse_args(argv)
    rows: list[dict] = []

    def kept(path: Path, args, log) -> dict:
        rows.append(scenario(path, args, log))
        return rows[-1]

    args.scenarios = [path for path in args.scenarios for _ in range(args.rounds)]
    run_scenarios(args, kept, "mpcoa-stream-subflows-")
    verdict = judge(rows, args)
    if verdict:
        print(json.dumps({"verdict": verdict}), flush=True)
    return 0 if all(v["holds"] for v in verdict.values()) else 1


def judge(rows: list[dict], args) -> dict[str, dict]:
    """The goals asked for, over the rounds measured: the subsets each selection chose in a
    majority of rounds, the median p99 ratio."""
    out: dict[str, dict] = {}
    for side, expected in (("bulk", args.expect_bulk), ("stream", args.expect_stream)):
        if expected is not None:
            chosen = [sorted(r[f"{side}_selection"]["subset"]) for r in rows
                      if f"{side}_selection" in r]
            hits = sum(c == sorted(expected) for c in chosen)
            out[f"{side}_subset"] = {"expected": sorted(expected), "chosen": chosen,
                                     "holds": 2 * hits > len(rows)}
    if args.min_p99_ratio is not None:
        ratios = [r.get("p99_ratio") for r in rows]
        known = [x for x in ratios if x is not None]
        median = statistics.median(known) if len(known) == len(rows) and known else None
        out["p99_ratio"] = {"min": args.min_p99_ratio, "rounds": ratios, "median": median,
                            "holds": median is not None and median >= args.min_p99_ratio}
    return out


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
