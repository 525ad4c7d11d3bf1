"""Deciding for a stream: which PM, CC and buffer carry the stream with the smallest p99 frame
delay (docs/algorithm.md, "Deciding for streams").

Per measured point (arm, buffer) the runs give goodput, the fraction of frames lost and the
p99 frame delay. The rule:

1. a point **carries** the stream when its mean goodput reaches the stream's rate (less
   `rate_tolerance`, 2 %: a paced stream's goodput is the rate itself, binned into intervals,
   so "goodput >= rate" taken literally fails half the runs by rounding) and its mean lost
   fraction is at most `max_loss`;
2. among carrying points, the smallest mean p99 delay picks the **arm** (OPM, OCC);
3. in that arm, OBS is the **smallest buffer** that carries and whose mean p99 is within
   (1 + delta) of the arm's best: a larger buffer only adds queueing (bufferbloat under
   Cubic/Reno), so the smallest one near the best is the answer, as the bulk rule takes the
   smallest buffer within delta of T*. But not a buffer **at the carrying edge** (the grid
   point just below it does not carry) when a larger one also qualifies: the edge lies
   somewhere between the two points, and a point just above it carries in some runs and not in
   others. Measured on `shared.yaml` at 4 Mbit/s of 20,000-byte frames: 0.0211 MiB, one frame's
   worth, carried in both campaign runs at 35 ms, and fresh probes then took 1828 and 108 ms.
   A stream below its paths' capacity does not fill a larger send buffer, so the step up costs
   little delay.

Unlike goodput, delay need not be monotone in the buffer (too small: frames wait in the
sender; too large: they wait in a bloated queue), so there is no bisection: every point of the
grid is measured `min_runs` times, then repeats go only where they can change the decision (up
to `max_runs` per point): the chosen point and any other arm's best point whose p99 interval
overlaps it, and the chosen arm's buffers below OBS whose interval straddles the (1 + delta)
line. Intervals are Student-t at `confidence` with the spread pooled as in the bulk sweep
(`adaptive.pooled_noise`), but over the arm's own carrying points only: a point that does not
carry the stream (its frames wait for seconds) says nothing about a carried stream's spread, and
another arm's paths say nothing about this arm's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, ClassVar

from probes.vocabulary import PathManager

from .adaptive import DEFAULT_CONFIDENCE, MAX_RUNS, MIN_RUNS, WantedProbe, pooled_noise
from .alternative import Alternative
from .arm import Arm
from .stored_form import OTHER, PRESENT, StoredForm, each, flag, names, number, text, why
from .stream_interval import fresh_p99_half_width, run_spread

RATE_TOLERANCE = 0.02
DEFAULT_MAX_LOSS = 0.01


@dataclass(frozen=True)
class StreamRun:
    """One paced probe's figures."""

    goodput_mbps: float
    p99_ms: float | None  #: None: no frame arrived
    lost_fraction: float


Runs = Mapping[Arm, Mapping[float, Sequence[StreamRun]]]


@dataclass(frozen=True)
class StreamDecision(StoredForm):
    """The probes still wanted, or the decision for a stream (`settled`). Stored as it is, in a
    campaign's state (`state.sweep_outcome.StreamSweepOutcome`), without the probes."""

    probes: tuple[WantedProbe, ...] = ()
    settled: bool = False
    opm: PathManager | None = None
    occ: str | None = None
    obs_mib: float | None = None
    p99_ms: float | None = None  #: the chosen point's mean p99 frame delay
    p99_half_width_ms: float | None = None
    goodput_mbps: float | None = None
    lost_fraction: float | None = None
    best_p99_ms: float | None = None  #: the chosen arm's best point
    best_bs_mib: float | None = None
    limit_p99_ms: float | None = None  #: (1 + delta) x best
    skipped_edge_mib: float | None = None  #: a qualifying buffer at the carrying edge, passed
    carrying: tuple[str, ...] = ()  #: arms with a carrying point
    not_carrying: Mapping[str, str] = field(default_factory=dict)  #: arm -> why
    alternatives: tuple[Alternative, ...] = ()
    pm_settled: bool = False
    cc_settled: bool = False
    confidence: float = DEFAULT_CONFIDENCE
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {
        "settled": flag, "opm": text, "occ": text, "obs_mib": number,
        "p99_ms": number, "p99_half_width_ms": number, "goodput_mbps": number,
        "lost_fraction": number, "best_p99_ms": number, "best_bs_mib": number,
        "limit_p99_ms": number, "skipped_edge_mib": number, "carrying": names,
        "not_carrying": why, "alternatives": each(Alternative), "pm_settled": flag,
        "cc_settled": flag, "confidence": number,
    }

    def __post_init__(self) -> None:
        # frozen all the way down: the sequences it is given are kept as tuples
        for name in ("probes", "carrying", "alternatives"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def p99_interval(self) -> tuple[float, float] | None:
        """Where one fresh probe's p99 at the chosen point lands (`stream_interval`); None when
        no spread is known (one run per point: the campaign's grid with `runs` 1)."""
        if (self.p99_ms is None or self.p99_half_width_ms is None
                or not math.isfinite(self.p99_half_width_ms)):
            return None
        return self.p99_ms - self.p99_half_width_ms, self.p99_ms + self.p99_half_width_ms


def _label(arm: Arm) -> str:
    return f"{arm[0]}/{arm[1]}"


def carries(runs: Sequence[StreamRun], rate_mbps: float, max_loss: float,
            rate_tolerance: float = RATE_TOLERANCE) -> bool:
    if not runs or any(r.p99_ms is None for r in runs):
        return False
    return (fmean(r.goodput_mbps for r in runs) >= rate_mbps * (1 - rate_tolerance)
            and fmean(r.lost_fraction for r in runs) <= max_loss)


def check_stream_rule(rate_mbps: float, delta: float, max_loss: float, min_runs: int,
                      max_runs: int) -> None:
    """The arguments of a stream rule (this grid one and `stream_sweep`'s), or a ValueError."""
    if rate_mbps <= 0 or not 0 <= delta < 1 or not 0 <= max_loss < 1:
        raise ValueError("rate_mbps > 0, 0 <= delta < 1 and 0 <= max_loss < 1")
    if min_runs < 1 or max_runs < min_runs:
        raise ValueError("1 <= min_runs <= max_runs")


def decide_stream(
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
    """Probes still needed, or the decision (see the module's rule)."""
    check_stream_rule(rate_mbps, delta, max_loss, min_runs, max_runs)
    grid = sorted(set(grid))
    arms = [Arm(*a) for a in arms]

    def at(arm: Arm, bs: float) -> Sequence[StreamRun]:
        return runs.get(arm, {}).get(bs, ())

    missing = [WantedProbe(a.pm, a.cc, bs)
               for a in arms for bs in grid if len(at(a, bs)) < min_runs]
    if missing:
        return StreamDecision(probes=missing, confidence=confidence)
    p99s = {a: {bs: [r.p99_ms for r in at(a, bs) if r.p99_ms is not None] for bs in grid}
            for a in arms}
    ok = {a: [bs for bs in grid if carries(at(a, bs), rate_mbps, max_loss, rate_tolerance)]
          for a in arms}
    # Only carrying points say how a carried stream's p99 varies: where the stream is not
    # carried its frames wait for seconds, and their spread would swamp the interval. And per
    # arm: an arm's delay spread is its own paths' (a FullMesh arm whose slow subflow now and
    # then holds frames for 200 ms says nothing of a PCDC arm on the fast one alone).
    noise = {a: pooled_noise({a: {bs: p99s[a][bs] for bs in ok[a]}}) for a in arms}

    def hw(arm: Arm, bs: float) -> float:
        return noise[arm].half_width(len(p99s[arm][bs]), confidence)

    def mean(arm: Arm, bs: float) -> float:
        return fmean(p99s[arm][bs])

    carrying = [_label(a) for a in arms if ok[a]]
    not_carrying = {_label(a): _why_not(at, a, grid, rate_mbps, max_loss, rate_tolerance)
                    for a in arms if not ok[a]}
    if not carrying:  # measured everywhere: nothing carries the stream
        return StreamDecision(settled=True, carrying=carrying, not_carrying=not_carrying,
                              confidence=confidence)
    best_of = {a: min(ok[a], key=lambda bs: (mean(a, bs), bs)) for a in arms if ok[a]}
    chosen = min(best_of, key=lambda a: (mean(a, best_of[a]), best_of[a]))
    best_bs = best_of[chosen]
    best = mean(chosen, best_bs)
    limit = (1 + delta) * best
    within = [bs for bs in ok[chosen] if mean(chosen, bs) <= limit]  # best_bs is among them

    def at_edge(bs: float) -> bool:
        below = [g for g in grid if g < bs]
        return bool(below) and below[-1] not in ok[chosen]

    obs = next((bs for bs in within if not at_edge(bs)), within[0])
    # the answer states where one fresh probe lands (`stream_interval`), as the sweep's does,
    # from its own arm's spread (above); the intervals of means only steer the repeats
    p99 = mean(chosen, obs)
    alternatives: list[Alternative] = []
    probes: list[WantedProbe] = []
    # rivals: other arms' best points whose interval overlaps the chosen best's
    for a, bs in best_of.items():
        if a == chosen:
            continue
        m, ha = mean(a, bs), hw(a, bs)
        if m - ha <= best + hw(chosen, best_bs) and best - hw(chosen, best_bs) <= m + ha:
            differs = tuple(k for k, same in (("pm", a.pm == chosen.pm),
                                              ("cc", a.cc == chosen.cc)) if not same)
            alternatives.append(Alternative(_label(a), m / best - 1, differs))
            if len(p99s[a][bs]) < max_runs:
                probes.append(WantedProbe(a.pm, a.cc, bs))
    alternatives.sort(key=lambda x: x.relative)
    if alternatives and len(p99s[chosen][best_bs]) < max_runs:
        probes.append(WantedProbe(chosen.pm, chosen.cc, best_bs))
    # the chosen arm's buffers up to OBS whose interval straddles the (1 + delta) line
    for bs in ok[chosen]:
        if bs > obs:
            break
        if mean(chosen, bs) - hw(chosen, bs) <= limit <= mean(chosen, bs) + hw(chosen, bs) \
                and len(p99s[chosen][bs]) < max_runs:
            probes.append(WantedProbe(chosen.pm, chosen.cc, bs))
    probes = list(dict.fromkeys(probes))
    return StreamDecision(
        probes=probes, settled=not probes, opm=chosen.pm, occ=chosen.cc, obs_mib=obs,
        p99_ms=p99,
        p99_half_width_ms=fresh_p99_half_width(
            p99, len(p99s[chosen][obs]),
            run_spread(p99s[chosen][bs] for bs in ok[chosen]), confidence),
        goodput_mbps=fmean(r.goodput_mbps for r in at(chosen, obs)),
        lost_fraction=fmean(r.lost_fraction for r in at(chosen, obs)),
        best_p99_ms=best, best_bs_mib=best_bs, limit_p99_ms=limit,
        skipped_edge_mib=within[0] if obs != within[0] else None,
        carrying=carrying, not_carrying=not_carrying, alternatives=alternatives,
        pm_settled=not any("pm" in a.differs_in for a in alternatives),
        cc_settled=not any("cc" in a.differs_in for a in alternatives),
        confidence=confidence,
    )


def _why_not(at, arm: Arm, grid: Sequence[float], rate: float, max_loss: float,
             tol: float) -> str:
    best_bs = max(grid, key=lambda bs: fmean(r.goodput_mbps for r in at(arm, bs)))
    rs = at(arm, best_bs)
    gp = fmean(r.goodput_mbps for r in rs)
    lost = fmean(r.lost_fraction for r in rs)
    if gp < rate * (1 - tol):
        return f"goodput {gp:.3g} Mbit/s at best ({best_bs:g} MiB) under the rate {rate:.3g}"
    if lost > max_loss:
        return f"{lost:.1%} of frames lost at {best_bs:g} MiB (allowed {max_loss:.1%})"
    return "no frame arrived" if math.isfinite(gp) else "not measured"
