"""The adaptive stream sweep: the next paced probes from what has been measured, until the
stream's decision (OPM, OCC, OBS on the grid, smallest p99 frame delay among the points that
carry the stream) is settled. The bulk sweep's rules of confidence (`adaptive`): probe where the
decision is open, repeat what could still win, stop when settled. `decide_stream_sweep(arms,
grid, runs, ...)` runs four named steps over `runs[arm][bs]`, the paced runs so far:

1. **reference**: every arm once at the grid's middle point (`reference_buffer`). A stream
   below its paths' capacity does not fill a larger buffer, so an arm's p99 there is its
   level, while the largest ones can add queueing (shared.yaml, PCDC/bbr at 4 Mbit/s: p99 44 ms
   at 0.047 MiB, 56 ms at 0.42 MiB). An arm that does not carry the stream there is probed once
   at the largest buffer; one that does not carry there either (a stalled probe among them) is
   out: no smaller buffer carries what the largest cannot, and a repeat runs into the same
   stall;
2. **leader**: the arm with the smallest mean p99 at a carrying point, its best point repeated
   to `min_runs` (the first spread); an arm **could still win** while its best point's lower
   bound, given delta/2 (`ARM_TOLERANCE`), is under the leader's upper bound: both points are
   repeated (up to `CONTENDER_MAX_RUNS`) until the intervals part, else it is an alternative
   within reach; the rest are eliminated;
3. **descent**: in the leader's arm, a bisection over the grid below its best point for the
   smallest buffer that carries and whose p99 **reaches** (1 + delta) x the arm's best: its
   lower bound does, as a bulk buffer reaches the target (delay need not be monotone in the
   buffer, but above the carrying edge a paced stream's is flat; one run per step, a point that
   does not carry is decided by it). By the mean instead, one noisy run moved the answer up the
   grid step by step (shared.yaml: 0.021, 0.028, 0.038, 0.052 and 0.070 MiB measured in turn,
   19 probes, for 0.094 MiB, where 0.028 read 37.7 and 45.3 ms against the best's 37.3). Then
   `stream_choice`'s edge rule: a qualifying buffer whose grid neighbour below does not carry
   is passed for the next one up, measured if it was not;
4. **answer**: OBS repeated to `min_runs` (its interval), and while that interval straddles the
   (1 + delta) line, up to `CONTENDER_MAX_RUNS`; the leader's arm measured at `MIN_BUFFERS`
   buffers at least (the grid's largest first), so that its curve can be drawn and the campaign
   counts as calibrated. Settled when nothing is wanted. The answer states where one fresh
   probe's p99 should land (`stream_interval`: the runs' spread and the host's drift), as the
   bulk sweep's promise does.

Intervals are relative (`RelativeNoise`): Student-t on the spread of ln p99, one spread for
every carrying point, read as the median of the points' own spreads, each from its median
absolute deviation from 3 runs. Relative, because an arm at 130 ms spreads more in ms than one
at 35 ms; medians, because p99 has outliers that a pooled variance takes whole (shared.yaml,
PCDC/reno at 0.094 MiB: 38, 576, 38, 47 ms; pooled, that one run made every arm, FullMesh/bbr
at 122 ms too, a contender of PCDC's 40 ms). The decision is a `StreamDecision` like the
grid's, over the measured points only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, median, stdev

from .adaptive import DEFAULT_CONFIDENCE, MAX_RUNS, MIN_BUFFERS, MIN_RUNS, Noise, WantedProbe
from .alternative import Alternative
from .arm import Arm
from .stream_choice import (
    DEFAULT_MAX_LOSS,
    RATE_TOLERANCE,
    Runs,
    StreamDecision,
    StreamRun,
    carries,
    check_stream_rule,
)
from .stream_interval import fresh_p99_half_width, run_spread

#: a point tried without an ok probe (`flows` fills it in): it does not carry the stream
NO_PROBE = StreamRun(goodput_mbps=0.0, p99_ms=None, lost_fraction=1.0)
#: an arm could still win while it could be this share of delta better than the leader: the
#: leader's OBS may itself be up to delta over its arm's best, so the two shares leave the
#: answer within about (1 + delta) of the best
ARM_TOLERANCE = 0.5
#: what could still win is repeated up to this many runs, then stated within reach: p99 spreads
#: 10 % and more run to run on a busy host, and arms a few per cent apart (PCDC under reno, cubic
#: and bbr on one path) would each take `max_runs` to part, the sweep's budget several times
CONTENDER_MAX_RUNS = 3


@dataclass(frozen=True)
class RelativeNoise:
    """One run's spread of ln p99 (`noise`), for every carrying point."""

    noise: Noise
    confidence: float

    @classmethod
    def of(cls, p99s: Mapping[Arm, Mapping[float, Sequence[float]]],
           confidence: float) -> RelativeNoise:
        spreads, dof = [], 0
        for per in p99s.values():
            for values in per.values():
                logs = [math.log(v) for v in values if v > 0]
                if len(logs) > 1:
                    spreads.append(_spread(logs))
                    dof += len(logs) - 1
        return cls(Noise(median(spreads) if spreads else 0.0, dof), confidence)

    def bounds(self, mean: float, n: int) -> tuple[float, float]:
        """(lower, upper) of a point's mean p99 from `n` runs."""
        h = self.noise.half_width(n, self.confidence)
        if not math.isfinite(h):
            return 0.0, math.inf
        return mean * math.exp(-h), mean * math.exp(h)


def decide_stream_sweep(
    arms: Sequence[Arm],
    grid: Sequence[float],
    runs: Runs,
    *,
    rate_mbps: float,
    delta: float,
    max_loss: float = DEFAULT_MAX_LOSS,
    confidence: float = DEFAULT_CONFIDENCE,
    min_runs: int = MIN_RUNS,
    max_runs: int = MAX_RUNS,
    rate_tolerance: float = RATE_TOLERANCE,
) -> StreamDecision:
    """Probes still wanted, first the most pressing, or the settled decision (module's rule)."""
    check_stream_rule(rate_mbps, delta, max_loss, min_runs, max_runs)
    if not grid:
        raise ValueError("a grid of one buffer at least")
    grid = sorted(set(grid))
    arms = [Arm(*a) for a in arms]
    top, ref = grid[-1], reference_buffer(grid)

    def at(arm: Arm, bs: float) -> Sequence[StreamRun]:
        return runs.get(arm, {}).get(bs, ())

    def ok(arm: Arm, bs: float) -> bool:
        return carries(at(arm, bs), rate_mbps, max_loss, rate_tolerance)

    # 1. reference
    missing = [WantedProbe(a.pm, a.cc, ref) for a in arms if not at(a, ref)]
    missing += [WantedProbe(a.pm, a.cc, top) for a in arms
                if at(a, ref) and not ok(a, ref) and not at(a, top)]
    if missing:
        return StreamDecision(probes=missing, confidence=confidence)
    measured = {a: [bs for bs in grid if at(a, bs)] for a in arms}
    carrying = {a: [bs for bs in measured[a] if ok(a, bs)] for a in arms}
    p99s = {a: {bs: [r.p99_ms for r in at(a, bs) if r.p99_ms is not None]
                for bs in carrying[a]} for a in arms}
    noise = RelativeNoise.of(p99s, confidence)

    def mean(arm: Arm, bs: float) -> float:
        return fmean(p99s[arm][bs])

    def bounds(arm: Arm, bs: float) -> tuple[float, float]:
        return noise.bounds(mean(arm, bs), len(p99s[arm][bs]))

    def n(arm: Arm, bs: float) -> int:
        return len(at(arm, bs))

    carried = [_label(a) for a in arms if carrying[a]]
    not_carrying = {_label(a): _why_not(at(a, top), top, rate_mbps, max_loss, rate_tolerance)
                    for a in arms if not carrying[a]}
    if not carried:  # no arm carries the stream at the largest buffer
        return StreamDecision(settled=True, carrying=carried, not_carrying=not_carrying,
                              confidence=confidence)
    # 2. leader
    best_of = {a: min(carrying[a], key=lambda bs: (mean(a, bs), bs)) for a in arms if carrying[a]}
    chosen = min(best_of, key=lambda a: (mean(a, best_of[a]), best_of[a]))
    best_bs = best_of[chosen]
    best = mean(chosen, best_bs)
    limit = (1 + delta) * best
    wanted: list[WantedProbe] = []
    answer: dict = {}

    def want(arm: Arm, bs: float) -> None:
        wanted.append(WantedProbe(arm.pm, arm.cc, bs))

    if n(chosen, best_bs) < min_runs:
        want(chosen, best_bs)
    # 3. descent in the leader's arm
    obs, below_edge = _descent(grid, best_bs, lambda bs: bool(at(chosen, bs)),
                               lambda bs: ok(chosen, bs) and bounds(chosen, bs)[0] <= limit,
                               lambda bs: ok(chosen, bs))
    if obs is None:  # a point to measure first
        want(chosen, below_edge)
    else:
        # 4. the answer's runs
        p99, (low, high) = mean(chosen, obs), bounds(chosen, obs)
        if n(chosen, obs) < min_runs or (low <= limit <= high and obs != best_bs
                                         and n(chosen, obs) < min(max_runs, CONTENDER_MAX_RUNS)):
            want(chosen, obs)
        probed = [bs for bs in measured[chosen] if any(r != NO_PROBE for r in at(chosen, bs))]
        for bs in [b for b in reversed(grid) if b not in measured[chosen]][
                :max(0, MIN_BUFFERS - len(probed))]:
            want(chosen, bs)
        # the answer's interval: where one fresh probe of it should land, as the bulk sweep's
        # promise (the mean's own interval is narrower than the spread of new runs: on
        # shared.yaml 40.0-41.4 ms, and four fresh probes read 40.4-43.4), the host's drift
        # since the campaign included (`stream_interval`); None: no spread known yet
        answer = dict(
            skipped_edge_mib=below_edge, opm=chosen.pm, occ=chosen.cc, obs_mib=obs,
            p99_ms=p99,
            p99_half_width_ms=fresh_p99_half_width(
                p99, len(p99s[chosen][obs]),
                run_spread(p99s[a][bs] for a in arms for bs in carrying[a]), confidence),
            goodput_mbps=fmean(r.goodput_mbps for r in at(chosen, obs)),
            lost_fraction=fmean(r.lost_fraction for r in at(chosen, obs)),
            best_p99_ms=best, best_bs_mib=best_bs, limit_p99_ms=limit)
    # 2. (cont.) what could still win: repeated while the intervals overlap
    upper = bounds(chosen, best_bs)[1]
    alternatives: list[Alternative] = []
    for a, bs in best_of.items():
        if a == chosen:
            continue
        m = mean(a, bs)
        if bounds(a, bs)[0] * (1 + ARM_TOLERANCE * delta) > upper:
            continue  # eliminated: not better than the leader by a share of delta
        differs = tuple(k for k, same in (("pm", a.pm == chosen.pm),
                                          ("cc", a.cc == chosen.cc)) if not same)
        alternatives.append(Alternative(_label(a), m / best - 1, differs))
        cap = min(max_runs, CONTENDER_MAX_RUNS)
        if n(a, bs) < cap:
            want(a, bs)
            if n(chosen, best_bs) <= n(a, bs) and n(chosen, best_bs) < cap:
                want(chosen, best_bs)
    alternatives.sort(key=lambda x: x.relative)
    probes = list(dict.fromkeys(wanted))
    return StreamDecision(
        probes=probes, settled=not probes and answer.get("opm") is not None,
        carrying=carried, not_carrying=not_carrying, alternatives=alternatives,
        pm_settled=not any("pm" in a.differs_in for a in alternatives),
        cc_settled=not any("cc" in a.differs_in for a in alternatives),
        confidence=confidence, **answer,
    )


def _spread(values: Sequence[float]) -> float:
    """A sample's standard deviation, from 3 values robustly: 1.4826 x the median absolute
    deviation (the normal's sd), one outlier left out."""
    if len(values) < 3:
        return stdev(values)
    mid = median(values)
    return 1.4826 * median(abs(v - mid) for v in values)


def reference_buffer(grid: Sequence[float]) -> float:
    """Where every arm is measured first: the grid's middle point (the upper one of two)."""
    points = sorted(set(grid))
    return points[len(points) // 2]


def _descent(grid: Sequence[float], best_bs: float, measured, qualifies, carries_at
             ) -> tuple[float | None, float | None]:
    """(OBS, the qualifying buffer passed at the carrying edge or None), or (None, the buffer
    to measure next). Bisection over the grid up to the best point: between the largest
    measured point that does not qualify below the smallest that does, the middle is measured;
    then the edge rule (`stream_choice`'s)."""
    points = [bs for bs in grid if bs <= best_bs]
    hi = min((i for i, bs in enumerate(points) if measured(bs) and qualifies(bs)))
    lo = max((i for i, bs in enumerate(points[:hi]) if measured(bs)), default=-1)
    if hi - lo > 1:
        return None, points[(lo + hi) // 2]
    if hi == 0 or carries_at(points[hi - 1]):
        return points[hi], None
    # at the carrying edge: the next grid point up, if it qualifies (measured first)
    above = [bs for bs in grid if bs > points[hi]]
    if not above:
        return points[hi], None
    if not measured(above[0]):
        return None, above[0]
    return (above[0], points[hi]) if qualifies(above[0]) else (points[hi], None)


def _label(arm: Arm) -> str:
    return f"{arm[0]}/{arm[1]}"


def _why_not(rs: Sequence[StreamRun], bs: float, rate: float, max_loss: float,
             tol: float) -> str:
    gp = fmean(r.goodput_mbps for r in rs)
    lost = fmean(r.lost_fraction for r in rs)
    if any(r.p99_ms is None for r in rs):
        return f"no frame arrived at the largest buffer ({bs:g} MiB)"
    if gp < rate * (1 - tol):
        return f"goodput {gp:.3g} Mbit/s at the largest buffer ({bs:g} MiB) under the rate " \
               f"{rate:.3g}"
    if lost > max_loss:
        return f"{lost:.1%} of frames lost at {bs:g} MiB (allowed {max_loss:.1%})"
    return "not carried" if math.isfinite(gp) else "not measured"
