"""The adaptive decision in its named steps, and the settled answer (step 5).

`decide` runs, on what has been measured so far: the top band and T* (`top_band`), elimination
and bisection (`search`), then the decision here: the arm with the smallest buffer reaching the
target (ties: the higher mean there), once that buffer has `min_runs` runs; every survivor at
that buffer ends with at least `MIN_BUFFERS` measured buffers (one run each) so the regression
can draw it; the others are shown with what they have, like eliminated arms. Each step either
asks for probes (the caller runs them and asks again) or hands on to the next.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean

from ..alternative import Alternative
from ..arm import Arm
from .decision import (
    MAX_RUNS,
    MIN_BUFFERS,
    NEAR_LINE_MAX_RUNS,
    T_STAR_MAX_RUNS,
    BulkDecision,
    Points,
    WantedProbe,
)
from .noise import DEFAULT_CONFIDENCE, MIN_RUNS, PointNoise, Samples
from .search import Verdicts, bisection, eliminate
from .top_band import TStar, t_star, top_band


def decide(
    arms: Sequence[Arm],
    grid: Sequence[float],
    samples: Samples,
    delta: float,
    confidence: float = DEFAULT_CONFIDENCE,
    min_runs: int = MIN_RUNS,
    max_runs: int = MAX_RUNS,
    t_star_max_runs: int = T_STAR_MAX_RUNS,
    noise_samples: Samples | None = None,
    extended: Sequence[float] = (),
) -> BulkDecision:
    """The next batch of probes, or the settled decision. `noise_samples`: the runs the noise
    is pooled from, where some of `samples` hide their spread (`samples` when these leave no
    degree of freedom). `extended`: the buffers the caller added above the planned grid while
    the leader climbed (only the arms still climbing are measured there)."""
    points = Points.of(grid, samples, noise_samples, confidence, min_runs)
    arms = [Arm(*a) for a in arms]
    missing = top_band(points, arms, delta, extended)
    if missing:
        return BulkDecision(probes=missing)
    t = t_star(points, arms, delta, confidence)
    if not t.held and t.runs < t_star_max_runs:
        return BulkDecision(probes=[WantedProbe(*t.leader, t.bs)])  # a T* that holds, before use
    verdicts = eliminate(points, arms, t, delta, max_runs)
    missing = bisection(points, t, verdicts, max_runs)
    if missing:
        return BulkDecision(probes=missing)
    return _settle(points, t, verdicts, max_runs, extended)


def _settle(points: Points, t: TStar, verdicts: Verdicts, max_runs: int,
            extended: Sequence[float]) -> BulkDecision:
    """Step 5, the decision: the probes that still separate the answer from its neighbours
    (`_near_line`, `_drawable`, the tied arms' `min_runs`), else the settled answer."""
    grid, values, hw, obs = points.grid, points.values, t.hw, verdicts.obs
    missing = _near_line(points, t, verdicts, max_runs)
    if missing:
        return BulkDecision(probes=missing)
    survivors = [a for a in verdicts.survivors if a in obs]
    missing = _drawable(points, survivors, obs, extended)
    if missing:
        return BulkDecision(probes=missing)
    # the arms tied at the smallest OBS have `min_runs` runs there first (a single run settled
    # the bisection's verdicts; means of unequal counts would not compare fairly), and a
    # repeat that overturns a verdict sends the bisection on
    first = min(obs.values(), default=None)
    tied = [WantedProbe(*a, grid[first]) for a in survivors
            if obs[a] == first and points.short(a, grid[first])]
    if tied:
        return BulkDecision(probes=tied)
    chosen = min(survivors, key=lambda a: (obs[a], -fmean(values(a, grid[obs[a]]) or [0.0])))
    bs = grid[obs[chosen]]
    otp, otp_hw = fmean(values(chosen, bs)), hw(chosen, bs)
    alternatives = _within_reach(chosen, survivors, bs, otp, otp_hw, values, hw)
    noise = points.noise.of_arm(chosen)
    return BulkDecision(
        settled=True, opm=chosen.pm, occ=chosen.cc, obs_mib=bs,
        otp_mbps=otp, otp_half_width_mbps=otp_hw,
        t_star_mbps=t.mbps, target_mbps=verdicts.target,
        survivors=[a.label for a in survivors],
        eliminated=[a.label for a in verdicts.eliminated],
        otp_runs=len(values(chosen, bs)), t_star_half_width_mbps=t.half_width,
        t_star_runs=t.runs, t_star_held=t.held, confidence=points.noise.confidence,
        noise_sd_mbps=noise.sd, noise_dof=noise.dof,
        alternatives=alternatives,
        pm_settled=not any("pm" in a.differs_in for a in alternatives),
        cc_settled=not any("cc" in a.differs_in for a in alternatives),
    )


def _near_line(points: Points, t: TStar, verdicts: Verdicts,
               max_runs: int) -> list[WantedProbe]:
    """A buffer below the answer's whose mean reaches the target while its interval still
    straddles it after `max_runs` is measured further (up to `NEAR_LINE_MAX_RUNS`), on any arm
    the elimination kept: it decides between the answer's buffer and a smaller one (the
    bisection reads it as short until its interval clears the line, as the answer's solve
    does)."""
    first_obs = min(verdicts.obs.values(), default=None)
    return [
        WantedProbe(*arm, bs) for arm in verdicts.survivors for bs in points.grid[:first_obs or 0]
        if max_runs <= len(v := points.values(arm, bs)) < NEAR_LINE_MAX_RUNS
        and fmean(v) - t.hw(arm, bs) < verdicts.target <= fmean(v)
    ]


def _drawable(points: Points, survivors: list[Arm], obs: dict[Arm, int],
              extended: Sequence[float]) -> list[WantedProbe]:
    """Every survivor at the smallest OBS drawable: at least `MIN_BUFFERS` measured buffers (one
    run each: the fit only draws the curve; the answer is read off the measured means). An arm
    that needs a larger buffer is shown with what it has, like an eliminated one."""
    first_obs = min(obs.values(), default=None)
    planned = [bs for bs in points.grid if bs not in extended] or points.grid
    probes: list[WantedProbe] = []
    for arm in survivors:
        if obs[arm] != first_obs:
            continue
        measured = sorted(bs for bs, v in points.samples.get(arm, {}).items() if v)
        if len(measured) < MIN_BUFFERS:
            extra = _filler(planned, measured)
            if extra is not None:
                probes.append(WantedProbe(*arm, extra))
    return probes


def _within_reach(chosen, survivors, bs, otp, otp_hw, values, hw) -> list[Alternative]:
    """Surviving arms measured at OBS whose interval there overlaps the chosen one's. Arms not
    measured at OBS were settled by the bisection (they need a larger buffer); eliminated arms
    were settled below the target."""
    out = []
    for arm in survivors:
        v = values(arm, bs)
        if arm == chosen or not v or otp <= 0:
            continue
        mean, h = fmean(v), hw(arm, bs)
        if mean - h <= otp + otp_hw and otp - otp_hw <= mean + h:
            differs = tuple(k for k, same in (("pm", arm.pm == chosen.pm),
                                              ("cc", arm.cc == chosen.cc)) if not same)
            out.append(Alternative(arm.label, mean / otp - 1, differs))
    return sorted(out, key=lambda a: -a.relative)


def within_links(samples: Samples, links_mbps: float | None, delta: float,
                 noise_samples: Samples | None = None,
                 confidence: float = DEFAULT_CONFIDENCE) -> bool:
    """Some measured point's lower bound (its mean less its half-width, as `decide` reads it)
    reaches (1 - delta) x `links_mbps`, what every subflow's links carry together: that point
    is within delta of any T* a larger buffer could show, for no mean exceeds the links' rate
    (`capacity.capped_mean`)."""
    if not links_mbps or links_mbps <= 0:
        return False
    points = PointNoise.of(samples, noise_samples, confidence)
    bar = (1 - delta) * links_mbps
    return any(fmean(v) - points.half_width(Arm(*arm), bs, len(v)) >= bar
               for arm, per_bs in samples.items() for bs, v in per_bs.items() if v)


def _filler(grid: Sequence[float], measured: Sequence[float]) -> float | None:
    """A grid buffer not measured yet, as far from the measured ones as possible (log scale)."""
    free = [b for b in grid if b not in measured]
    if not free:
        return None
    return max(free, key=lambda b: min(abs(math.log(b / m)) for m in measured))
