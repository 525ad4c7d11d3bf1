"""Is a stream answer right? An exhaustive paced oracle against the product's stream campaign.

    .venv/bin/python benchmarks/stream_accuracy.py SCENARIO.yaml --stream-mbps R
    .venv/bin/python benchmarks/accuracy.py --objective stream SCENARIO.yaml --stream-mbps R

Per scenario (a testbed file, as for `benchmarks/accuracy.py`, whose helpers this reuses):
1. **Oracle**: every PM x CC the kernel offers x buffer of a dense grid, `--oracle-runs` paced
   probes of `--oracle-duration` s each, built and timed as the campaign's are (the stream's
   frame rate and size, `executor.profile_of`; the timing rule over the subflows a probe uses,
   `flows.campaign.timing`). FullMesh runs every subflow; PCDC the proper subset whose paced probes
   carry the stream with the smallest p99 at the grid's second-largest buffer
   (`accuracy.best_subset_of`). The best is the carrying cell (`stream_choice.carries`) with the
   smallest mean p99.
2. **Campaign**: the product's stream campaign in-process with its default settings (its grid
   from the paths' bandwidth-delay products, its mode (adaptive: the stream sweep), model,
   budget), on the CCs the oracle
   measured, with `--campaign-runs` x `--campaign-duration` (default: the oracle's runs and
   duration, so both sides probe alike), and its answer.
3. **Fresh probes**: the answer (OPM, OCC, OBS, the subflows it states) and the oracle's best,
   interleaved, `--fresh-runs` each of the oracle's duration.

**Ratio convention.** Delay is better smaller, so `ratio` is the fresh mean p99 of the oracle's
best over the fresh mean p99 of the answer: 1 when the answer is as good as the best, under 1
when it is worse. The answer is good when `ratio` >= 1 / (1 + delta) (its p99 within (1 + delta)
of the best's, the stream rule's own limit): `within_delta`. `ratio_vs_oracle_cell` divides the
oracle's cell mean instead of its fresh probes (the cell is the smallest of many noisy means, a
lucky draw). A fresh probe that does not carry the stream has an infinite p99: ratio 0.

Prints one JSON line per scenario: scenario, stream, rate_mbps, delta, oracle_best {pm, cc,
subflows, bs_mib, p99_ms}, answer {pm, cc, obs_mib, subflows, p99_ms, p99_interval_ms, settled,
flags}, answer_fresh_p99_ms (+ runs), oracle_best_fresh_p99_ms (+ runs), ratio,
ratio_vs_oracle_cell, within_delta, fresh_inside_interval, probe_seconds_oracle,
probe_seconds_campaign, campaign_probe_ratio (campaign / oracle probe-seconds), campaign_spent
(per phase), campaign_paced_probes (how far its paced probes ran past their duration, how many
stalled), campaign_extra_rounds, wall_s. Smoke runs: fewer `--ccs`, `--grid-points`,
`--oracle-runs`, a shorter `--oracle-duration`.

`--oracle-dir DIR` records each scenario's oracle (`<scenario>.stream-oracle.json`: every cell's
runs) and reuses one recorded with the same stream, CCs, grid, runs and duration, so a changed
campaign is judged again without the oracle; the oracle's best is still probed fresh beside the
answer. `--oracle-only` measures and records the oracle and runs no campaign.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.oracle import (
    best_subset_of,
    dense_grid,
    probe_result,
    run_campaign,
    run_scenarios,
    topology_of,
)
from service.algorithm.stream_choice import StreamRun, carries


class Cell(NamedTuple):
    """One configuration the oracle measured."""

    pm: str
    cc: str
    subflows: tuple[str, ...]
    bs_mib: float


def run_of(result) -> StreamRun:
    """A paced probe's figures as the stream rule reads them
    (`flows.answers.stream_answer.stream_run` reads the same from a stored probe): no frames,
    nothing carried."""
    frames = result.frames
    if frames is None:
        return StreamRun(goodput_mbps=float(result.goodput_mbps or 0.0), p99_ms=None,
                         lost_fraction=1.0)
    return StreamRun(goodput_mbps=float(result.goodput_mbps or 0.0),
                     p99_ms=frames.delay_p99_ms, lost_fraction=frames.lost_fraction)


def mean_p99(runs: Sequence[StreamRun]) -> float:
    """The runs' mean p99 frame delay; infinite when a run delivered no frame."""
    if not runs or any(r.p99_ms is None for r in runs):
        return math.inf
    return statistics.fmean(r.p99_ms for r in runs if r.p99_ms is not None)


def best_carrying(cells: Mapping[Cell, Sequence[StreamRun]], rate_mbps: float,
                  max_loss: float) -> tuple[Cell, float] | None:
    """The cell that carries the stream (the product's `carries`) with the smallest mean p99,
    the smaller buffer on a tie; None when nothing carries it."""
    ok = [(mean_p99(runs), cell.bs_mib, cell) for cell, runs in cells.items()
          if carries(runs, rate_mbps, max_loss)]
    if not ok:
        return None
    p99, _bs, cell = min(ok, key=lambda t: (t[0], t[1]))
    return cell, p99


def ratio(best_p99_ms: float, answer_p99_ms: float) -> float:
    """best / answer p99 (see the module's convention); 0 when the answer did not carry."""
    if math.isinf(answer_p99_ms):
        return 0.0 if math.isfinite(best_p99_ms) else math.nan
    return best_p99_ms / answer_p99_ms if answer_p99_ms > 0 else math.nan


def within_delta(r: float, delta: float) -> bool:
    """The answer's p99 at most (1 + delta) x the best's (rounding at the limit forgiven)."""
    return r * (1 + delta) >= 1 - 1e-9


def inside(interval: Sequence[float] | None, value: float) -> bool | None:
    return None if not interval else interval[0] <= value <= interval[1]


class Bench:
    """The testbed, the stream and the campaign's timing rule: probes as the campaign runs them."""

    def __init__(self, bed, spec, sender, receiver, objective, log) -> None:
        from service.flows.campaign.executor import profile_of

        self.bed, self.spec, self.sender, self.receiver = bed, spec, sender, receiver
        self.topo, self.rtts = topology_of(spec, sender, receiver)
        self.names = self.topo.subflow_names()
        self.profile = profile_of(objective)
        self.log = log
        self.seconds = 0.0

    def timing(self, subflows: Sequence[str], duration: float, bs_mib: float
               ) -> tuple[float, float | None]:
        """(duration, warm-up or None) as `executor.pending_request` gives a campaign's probe."""
        from service.algorithm.probe_duration import probe_timing
        from service.flows.campaign.probing import buffer_bytes
        from service.flows.campaign.timing import lengthened

        bw = {sf.name: sf.bandwidth_kbps for sf in self.topo.subflows()}
        links = [(bw[n], self.rtts[n]) for n in subflows]
        t = probe_timing(links, duration, buffer_bytes=buffer_bytes(bs_mib))
        return (t.duration_s, t.warmup_s) if lengthened(t) else (duration, None)

    def probe(self, cell: Cell, duration: float) -> StreamRun:
        pm_subflows = list(cell.subflows)
        seconds, warmup = self.timing(pm_subflows, duration, cell.bs_mib)
        self.seconds += seconds
        try:
            result = probe_result(self.bed, self.sender, self.receiver, cell.cc, pm_subflows,
                                  self.names, cell.bs_mib, seconds, profile=self.profile,
                                  warmup_s=warmup)
        except RuntimeError as exc:  # unusable three times: it does not carry the stream
            self.log(f"    {cell}: {exc}")
            return StreamRun(goodput_mbps=0.0, p99_ms=None, lost_fraction=1.0)
        return run_of(result)


def run_oracle(b: Bench, ccs, grid, runs, duration, rate, max_loss
               ) -> dict[Cell, list[StreamRun]]:
    cells: dict[Cell, list[StreamRun]] = {}
    choose_at = grid[-2] if len(grid) >= 3 else grid[-1]
    for cc in ccs:
        def measure(subset: list[str], cc: str = cc) -> float:
            """Higher is better for `best_subset_of`: minus the mean p99 of a carrying subset,
            minus infinity for one that does not carry the stream."""
            rs = [b.probe(Cell("PCDC", cc, tuple(subset), choose_at), duration)
                  for _ in range(runs)]
            return -mean_p99(rs) if carries(rs, rate, max_loss) else -math.inf

        b.log(f"  oracle {cc}: PCDC subsets at {choose_at:g} MiB")
        subset = tuple(best_subset_of(measure, b.names, b.log, describe=_p99_text))
        for pm, subflows in (("FullMesh", tuple(b.names)), ("PCDC", subset)):
            for bs in grid:
                cell = Cell(pm, cc, subflows, bs)
                cells[cell] = [b.probe(cell, duration) for _ in range(runs)]
                rs = cells[cell]
                b.log(f"  oracle {pm}/{cc} {'+'.join(subflows)} {bs:g} MiB: p99 "
                      f"{mean_p99(rs):.1f} ms, {statistics.fmean(r.goodput_mbps for r in rs):.2f}"
                      f" Mbit/s, carries {carries(rs, rate, max_loss)}")
    return cells


def _oracle_settings(objective, ccs, grid, args) -> dict:
    return {"stream": objective.key(), "ccs": list(ccs), "grid_mib": list(grid),
            "runs": args.oracle_runs, "duration_s": args.oracle_duration}


def recorded_oracle(folder: Path | None, path: Path, settings: dict, log
                    ) -> tuple[dict[Cell, list[StreamRun]], float] | None:
    """The oracle recorded in `folder` for this scenario and these settings, else None."""
    file = None if folder is None else folder / f"{path.stem}.stream-oracle.json"
    if file is None or not file.exists():
        return None
    data = json.loads(file.read_text())
    if data.get("settings") != settings:
        log(f"  oracle in {file} was measured with other settings: measuring afresh")
        return None
    log(f"  oracle: recorded in {file}")
    cells = {Cell(c["pm"], c["cc"], tuple(c["subflows"]), float(c["bs_mib"])):
             [StreamRun(**r) for r in c["runs"]] for c in data["cells"]}
    return cells, float(data["probe_seconds"])


def record_oracle(folder: Path | None, path: Path, settings: dict,
                  cells: Mapping[Cell, Sequence[StreamRun]], seconds: float) -> None:
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{path.stem}.stream-oracle.json").write_text(json.dumps({
        "settings": settings, "probe_seconds": seconds,
        "cells": [{"pm": c.pm, "cc": c.cc, "subflows": list(c.subflows), "bs_mib": c.bs_mib,
                   "runs": [dataclasses.asdict(r) for r in runs]} for c, runs in cells.items()],
    }, indent=1))


def _p99_text(score: float) -> str:
    return "does not carry the stream" if math.isinf(score) else f"p99 {-score:.1f} ms"


def stream_objective(args):
    """The stream objective the command line asks for (`--stream-mbps`, `--frame-rate`, and
    `--delay-budget-ms` where the benchmark has it)."""
    from service.algorithm.objective import Objective

    budget = getattr(args, "delay_budget_ms", None)
    return Objective.model_validate({
        "kind": "stream", "bitrate_mbps": args.stream_mbps,
        **({"frame_rate_hz": args.frame_rate} if args.frame_rate else {}),
        **({"delay_budget_ms": budget} if budget else {})})


def scenario(path: Path, args, log) -> dict:
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import load_spec

    started = time.monotonic()
    objective = stream_objective(args)
    rate, max_loss = objective.rate_mbps, objective.loss_allowed
    spec = load_spec(path)
    sender, receiver = (s.name for s in spec.sites)
    grid = dense_grid(spec, sender, receiver, args.grid_points, args.grid_top)
    bed = testbed.up(spec)
    try:
        b = Bench(bed, spec, sender, receiver, objective, log)
        ccs = sorted(set(testbed.available_congestion_controls()) & set(args.ccs))
        settings = _oracle_settings(objective, ccs, grid, args)
        recorded = recorded_oracle(args.oracle_dir, path, settings, log)
        if recorded is None:
            cells = run_oracle(b, ccs, grid, args.oracle_runs, args.oracle_duration, rate,
                               max_loss)
            oracle_seconds = b.seconds
            record_oracle(args.oracle_dir, path, settings, cells, oracle_seconds)
        else:
            cells, oracle_seconds = recorded
        found = best_carrying(cells, rate, max_loss)
        if found is None:
            raise RuntimeError("no measured configuration carries the stream")
        best, best_p99 = found
        log(f"  oracle best: {best} p99 {best_p99:.1f} ms")
        if args.oracle_only:
            return {"scenario": path.stem, "stream": objective.key(), "oracle_only": True,
                    "oracle_best": {"pm": best.pm, "cc": best.cc,
                                    "subflows": list(best.subflows), "bs_mib": best.bs_mib,
                                    "p99_ms": round(best_p99, 3)},
                    "probe_seconds_oracle": round(oracle_seconds, 1),
                    "wall_s": round(time.monotonic() - started, 1)}
        rec = run_campaign(spec, sender, receiver, ccs, None, args.campaign_runs,
                           args.campaign_duration, args.delta, mode=None, objective=objective)
        overrun = probe_overrun(campaign_buffer_probes())
        stream = rec["outputs"].get("stream") or {}
        answer = Cell(rec["pm"], rec["cc"], tuple(rec["subflows"] or b.names), rec["obs_mib"])
        log(f"  campaign: {answer} p99 {stream.get('p99_ms')} ms "
            f"({rec['probe_seconds']:.0f} probe-s, {rec['wall_s']:.0f} s wall)")
        # Interleaved, same count and duration: drift over the minutes hits both alike.
        fresh_answer: list[StreamRun] = []
        fresh_best: list[StreamRun] = []
        for k in range(args.fresh_runs):
            pair = [(fresh_answer, answer), (fresh_best, best)]
            for into, cell in (pair if k % 2 == 0 else pair[::-1]):
                into.append(b.probe(cell, args.oracle_duration))
    finally:
        testbed.down(spec.name)
    answer_p99, best_fresh_p99 = mean_p99(fresh_answer), mean_p99(fresh_best)
    r = ratio(best_fresh_p99, answer_p99)
    interval = stream.get("p99_interval_ms")
    return {
        "scenario": path.stem, "stream": objective.key(), "rate_mbps": round(rate, 4),
        "delta": args.delta,
        "oracle_best": {"pm": best.pm, "cc": best.cc, "subflows": list(best.subflows),
                        "bs_mib": best.bs_mib, "p99_ms": round(best_p99, 3)},
        "answer": {"pm": rec["pm"], "cc": rec["cc"], "obs_mib": rec["obs_mib"],
                   "subflows": rec["subflows"], "p99_ms": _round(stream.get("p99_ms")),
                   "p99_interval_ms": interval, "settled": stream.get("settled"),
                   "flags": rec["flags"]},
        "answer_fresh_p99_ms": _round(answer_p99),
        "answer_fresh_runs_ms": [_round(x.p99_ms) for x in fresh_answer],
        "answer_fresh_carries": carries(fresh_answer, rate, max_loss),
        "oracle_best_fresh_p99_ms": _round(best_fresh_p99),
        "oracle_best_fresh_runs_ms": [_round(x.p99_ms) for x in fresh_best],
        "oracle_best_fresh_carries": carries(fresh_best, rate, max_loss),
        "ratio": _round(r, 4),
        "ratio_vs_oracle_cell": _round(ratio(best_p99, answer_p99), 4),
        "within_delta": within_delta(r, args.delta),
        "same_config": answer == best,
        "fresh_inside_interval": inside(interval, answer_p99),
        "probe_seconds_oracle": round(oracle_seconds, 1),
        "probe_seconds_campaign": rec["probe_seconds"],
        "campaign_probe_ratio": round(rec["probe_seconds"] / oracle_seconds, 3)
        if oracle_seconds else None,
        "campaign_wall_s": round(rec["wall_s"], 1),
        "campaign_mode": rec.get("mode"), "campaign_spent": rec.get("spent"),
        "campaign_paced_probes": overrun,
        "campaign_grid_mib": rec["grid"], "campaign_extra_rounds": rec["extra_rounds"],
        "oracle_settings": {"ccs": ccs, "grid_mib": grid, "runs": args.oracle_runs,
                            "duration_s": args.oracle_duration, "fresh_runs": args.fresh_runs},
        "wall_s": round(time.monotonic() - started, 1),
    }


def probe_overrun(campaign_rows) -> dict:
    """How far the campaign's paced probes ran past their duration (wall time from start to
    stored result less the probe's duration: tool start-up and the stall margin are in it), and
    how many stalled."""
    over = [(m.finished_at - m.started_at).total_seconds() - m.duration_s for m in campaign_rows]
    stalled = sum(1 for m in campaign_rows if '"stalled": "' in (m.raw_output or ""))
    return {"probes": len(over), "wall_over_duration_max_s": round(max(over, default=0.0), 2),
            "stalled": stalled}


def campaign_buffer_probes() -> list:
    """The buffer-phase probes of the campaign `run_campaign` ran (this run's own database)."""
    from sqlalchemy import select

    from models import Measurement
    from service.db import session_scope

    with session_scope() as s:
        rows = list(s.scalars(select(Measurement).where(Measurement.phase == "buffer")))
        s.expunge_all()
        return rows


def _round(x: float | None, digits: int = 3) -> float | None:
    """JSON has no infinity: a p99 of a stream not carried is null."""
    return None if x is None or not math.isfinite(x) else round(x, digits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="+", type=Path)
    ap.add_argument("--stream-mbps", type=float, required=True,
                    help="the stream's bitrate (25 frames/s unless --frame-rate)")
    ap.add_argument("--frame-rate", type=float, default=None)
    ap.add_argument("--delay-budget-ms", type=float, default=None)
    ap.add_argument("--ccs", nargs="+", default=["reno", "cubic", "bbr"])
    ap.add_argument("--delta", type=float, default=0.07)
    ap.add_argument("--grid-points", type=int, default=4)
    ap.add_argument("--grid-top", type=float, default=4.0,
                    help="the grid's largest buffer, in summed bandwidth-delay products")
    ap.add_argument("--oracle-runs", type=int, default=2)
    ap.add_argument("--oracle-duration", type=float, default=6.0)
    ap.add_argument("--fresh-runs", type=int, default=4)
    ap.add_argument("--campaign-runs", type=int, default=None,
                    help="default: --oracle-runs")
    ap.add_argument("--campaign-duration", type=float, default=None,
                    help="default: --oracle-duration")
    ap.add_argument("--oracle-dir", type=Path, default=None,
                    help="record each scenario's oracle here and reuse one recorded alike")
    ap.add_argument("--oracle-only", action="store_true",
                    help="measure and record the oracle (--oracle-dir), run no campaign")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    args.campaign_runs = args.campaign_runs or args.oracle_runs
    args.campaign_duration = args.campaign_duration or args.oracle_duration
    return run_scenarios(args, scenario, "mpcoa-stream-accuracy-")


if __name__ == "__main__":
    from probes.testbed.interrupts import run_stoppable  # SIGTERM tears the testbed down too

    raise SystemExit(run_stoppable(main))
