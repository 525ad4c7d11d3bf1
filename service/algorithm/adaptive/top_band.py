"""The first two steps of the adaptive decision: the top band (every arm at the grid's two
largest buffers, moved down while the leader falls towards the top) and T* (the best point,
repeated until its interval holds). `top_pair_means` tells the caller when to extend the grid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, stdev

from ..arm import Arm
from .decision import NEAR_THE_TOP, T_STAR_OWN_RUNS, T_STAR_PRECISION, Points, WantedProbe
from .noise import Noise, Samples


def top_band(points: Points, arms: Sequence[Arm], delta: float,
             extended: Sequence[float]) -> list[WantedProbe]:
    """Step 1: the probes the top band still needs, [] once it is settled. Every arm at the two
    largest buffers: `min_runs` runs at the top, one run below it (unless under `NEAR_THE_TOP`
    of the best at the top: it leads nowhere near it below, and elimination or the bisection
    judges it), and the leader `min_runs` at both. When the leader fell by more than delta from
    the lower to the upper one, the top is past the arms' best (a curve that rises and falls):
    the band moves one buffer down, as long as that keeps happening. One run below the top is
    enough to see which arm leads there; its pair's means decide the band."""
    grid, values, short = points.grid, points.values, points.short
    k = len(grid) - 1
    while True:
        band = grid[max(0, k - 1): k + 1]
        top, below = band[-1], band[0]
        at_top = _arms_at(k, arms, grid, points.samples, delta, extended)
        missing = [WantedProbe(*arm, top) for arm in at_top if short(arm, top)]
        if missing:
            return missing
        best_top = max(fmean(values(a, top)) for a in at_top)
        near = [a for a in at_top if fmean(values(a, top)) >= NEAR_THE_TOP * best_top]
        missing = [WantedProbe(*arm, below) for arm in near if not values(arm, below)]
        if missing:
            return missing
        leader = max(near, key=lambda a: max(fmean(v) for bs in band if (v := values(a, bs))))
        missing = [WantedProbe(*leader, bs) for bs in band if short(leader, bs)
                   and (bs == top or _may_fall(leader, below, top, values, points.hw, delta))]
        if missing:
            return missing
        if k < 2:
            return []
        lower, upper = (fmean(values(leader, bs)) for bs in band)
        if lower <= (1 + delta) * upper:
            return []
        k -= 1


@dataclass(frozen=True)
class TStar:
    """The best point measured (the leader's best buffer and mean), its half-width and runs,
    whether that half-width is under `T_STAR_PRECISION` x delta x T* (`held`), and every arm's
    best point (buffer, mean)."""

    leader: Arm
    mbps: float
    bs: float
    half_width: float
    runs: int
    held: bool
    bests: dict[Arm, tuple[float, float]]
    points: Points

    def hw(self, arm: Arm, bs: float) -> float:
        """A point's half-width as the later steps read it: T*'s own where its runs set it."""
        return self.half_width if (arm, bs) == (self.leader, self.bs) else self.points.hw(arm, bs)


def t_star(points: Points, arms: Sequence[Arm], delta: float, confidence: float) -> TStar:
    """Step 2: T*, the largest mean measured anywhere (a curve may rise and fall inside the
    grid). The largest of many 2-run means is a lucky draw more often than not, so the caller
    repeats T*'s point until `held` (or the run bound); when a repeat pulls it down another
    point may set T*, which is then repeated in turn. From `T_STAR_OWN_RUNS` runs the point is
    also judged by its own spread: an arm's collapses elsewhere say nothing of its top."""
    values = points.values

    def best_point(arm: Arm) -> tuple[float, float]:
        measured = [(bs, fmean(v)) for bs, v in points.samples.get(arm, {}).items() if v]
        return max(measured, key=lambda p: (p[1], -p[0]))

    bests = {arm: best_point(arm) for arm in arms}
    leader = max(arms, key=lambda a: bests[a][1])
    t_bs, mbps = bests[leader]
    t_hw, t_runs = points.hw(leader, t_bs), len(values(leader, t_bs))
    if t_runs >= T_STAR_OWN_RUNS:
        t_hw = min(t_hw, Noise(stdev(values(leader, t_bs)), t_runs - 1).half_width(
            t_runs, confidence))
    held = t_hw < T_STAR_PRECISION * delta * mbps
    return TStar(leader, mbps, t_bs, t_hw, t_runs, held, bests, points)


def _arms_at(k: int, arms: Sequence[Arm], grid: Sequence[float], samples: Samples,
             delta: float, extended: Sequence[float]) -> list[Arm]:
    """The arms measured at `grid[k]` as the band's top: every arm on the planned grid; at a
    buffer added above it, the arms measured at the buffer before that still climbing there by
    more than delta, and the leader there. An arm flat below an added buffer has shown its
    plateau, and the buffer was added for the leader's climb."""
    if k < 2 or grid[k] not in extended:
        return list(arms)
    before = [a for a in _arms_at(k - 1, arms, grid, samples, delta, extended)
              if samples.get(a, {}).get(grid[k - 1])]
    if not before:
        return list(arms)

    def mean(a: Arm, bs: float) -> float | None:
        v = samples.get(a, {}).get(bs)
        return fmean(v) if v else None

    leader = max(before, key=lambda a: mean(a, grid[k - 1]))
    return [a for a in before if a == leader or (
        (low := mean(a, grid[k - 2])) is not None and mean(a, grid[k - 1]) > (1 + delta) * low)]


def top_pair_means(
    arms: Sequence[Arm], grid: Sequence[float], samples: Samples, delta: float = 0.0,
    extended: Sequence[float] = (),
) -> dict[Arm, dict[float, float]] | None:
    """The top's leader's means at the top and one buffer lower, once both are measured (the
    input of `sweep.plateau_extension`: the caller extends the grid while it climbs), else
    None. At a buffer added above the planned grid only the arms still climbing are measured
    (`extended`, `delta`: as `decide` has them), so every arm near the top's best (as
    `decide`'s top band has them) is measured below it first: whether it climbs decides
    whether it is measured at the buffer added."""
    grid = sorted(set(grid))
    if len(grid) < 2:
        return None
    top, below = grid[-1], grid[-2]
    arms = _arms_at(len(grid) - 1, [Arm(*a) for a in arms], grid, samples, delta, extended)
    if any(not samples.get(a, {}).get(top) for a in arms):
        return None
    best_top = max(fmean(samples[a][top]) for a in arms)
    if any(not samples[a].get(below) for a in arms
           if fmean(samples[a][top]) >= NEAR_THE_TOP * best_top):
        return None
    leader = max(arms, key=lambda a: fmean(samples[a][top]))
    return {leader: {top: fmean(samples[leader][top]), below: fmean(samples[leader][below])}}


def _may_fall(leader, below: float, top: float, values, hw, delta: float) -> bool:
    """Whether the leader's runs below the top may still show it fell by more than delta from
    there to the top (the band then moves down): its interval below reaches (1 + delta) x its
    mean at the top. A single run far under the top settles it."""
    return fmean(values(leader, below)) + hw(leader, below) >= (
        (1 + delta) * fmean(values(leader, top)))
