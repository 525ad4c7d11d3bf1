"""Subflow selection for a stream objective: PCDC keeps a subflow only where it lowers the p99
frame delay, or where the stream is not carried without it (docs/algorithm.md, "Subflow selection
for a stream").

For bulk traffic a subflow that adds goodput is worth having; for a stream below its paths'
capacity it is not: a jittery or lossy path that adds goodput holds frames back at the
receiver's reassembly (a frame is delivered only when every segment of it, on every subflow,
has arrived), so it raises p99 frame delay. The rule is the bulk selection's (`selection.py`:
each subflow alone, forward selection, repeats only where the comparison is within noise and
more runs could settle it, the per-CC check of a reference CC), run on a *score* per paced run
instead of goodput:

* a run that **carries** the stream (its goodput reaches the rate less `RATE_TOLERANCE`, its
  lost fraction at most `max_loss`: `stream_choice.carries` for one run) scores
  `1000 / p99_ms` (frames' "p99 rate", per second): a higher score is a lower p99, and the
  selection's gain in score is the fall of p99 (a gain g is p99 x 1 / (1 + g)). The selection
  works on log scores, so delay noise counts as relative, as goodput noise does;
* a run that does **not** carry scores under `NOT_CARRIED_CEILING` (a p99 of 100 s), in
  proportion to the share of the rate it reached: below every carrying run (a carried stream
  beats any uncarried one), and among uncarried subsets the one that carries more of the
  stream leads, so a subflow **needed to carry** the stream is added.

So an addition is kept when the p99 it gives falls by more than `min_gain` (a campaign: δ/2)
with an interval that excludes that; a fall within noise is repeated (up to `max_runs`) where
the means and spreads measured would settle it, and otherwise the smaller subset is kept. The
stated link rates bound goodput, not delay: they are not used here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .selection_types import SelectionResult, SelectionState, Step
from .stream_choice import RATE_TOLERANCE, StreamRun
from .subset_stats import FLOOR_MBPS, Subset, SubsetEstimate, stored_figure

#: the highest score of a run that does not carry the stream: a p99 of 100 s
NOT_CARRIED_CEILING = 0.01
#: the score of a carried run whose p99 is at or under this (no frame can do better)
MIN_P99_MS = 0.01


def run_carries(run: StreamRun, rate_mbps: float, max_loss: float,
                rate_tolerance: float = RATE_TOLERANCE) -> bool:
    """One paced probe carried the stream: its rate (less the tolerance), its losses allowed,
    and a p99 delay measured."""
    return (run.p99_ms is not None and math.isfinite(run.p99_ms)
            and run.goodput_mbps >= rate_mbps * (1 - rate_tolerance)
            and run.lost_fraction <= max_loss)


def stream_score(run: StreamRun, rate_mbps: float, max_loss: float,
                 rate_tolerance: float = RATE_TOLERANCE) -> float:
    """The run's score: 1000 / p99 ms where it carries, else under `NOT_CARRIED_CEILING` by the
    share of the rate it reached (and of its frames delivered)."""
    if rate_mbps <= 0:
        raise ValueError(f"rate_mbps: must be > 0, got {rate_mbps!r}")
    if run_carries(run, rate_mbps, max_loss, rate_tolerance):
        return 1000.0 / max(float(run.p99_ms), MIN_P99_MS)
    share = min(1.0, max(0.0, run.goodput_mbps / rate_mbps))
    delivered = min(1.0, max(0.0, 1.0 - run.lost_fraction))
    return max(FLOOR_MBPS, NOT_CARRIED_CEILING * 0.999 * share * delivered)


def score_carries(score: float) -> bool:
    """A (mean) score above the uncarried ceiling: its runs carried the stream."""
    return score > NOT_CARRIED_CEILING


def p99_of_score(score: float) -> float | None:
    """The p99 frame delay (ms) a score stands for; None for an uncarried one."""
    if not score_carries(score) or not math.isfinite(score):
        return None
    return 1000.0 / score


def p99_change(gain_fraction: float) -> float:
    """A gain in score as the relative change of p99 (−0.2: p99 20 % lower)."""
    return 1.0 / (1.0 + gain_fraction) - 1.0 if gain_fraction > -1 else math.inf


def stream_state(
    subflows: Sequence[str],
    runs: Mapping[Subset, Sequence[StreamRun]],
    failures: Mapping[Subset, int] | None = None,
    *,
    rate_mbps: float,
    max_loss: float,
    rate_tolerance: float = RATE_TOLERANCE,
    **settings,
) -> SelectionState:
    """The selection's state over paced runs: each run scored (`stream_score`), everything else
    (`cc`, `reference`, `budget`, `min_gain`, `negligible`, `rtts_ms`, runs and confidence) as
    the bulk selection takes it. `capacity` is refused: stated rates bound goodput, not delay."""
    if settings.get("capacity") is not None:
        raise ValueError("capacity: the stated rates do not bound frame delay")
    if not 0 <= max_loss < 1:
        raise ValueError(f"max_loss: must be in [0, 1), got {max_loss!r}")
    samples = {subset: [stream_score(r, rate_mbps, max_loss, rate_tolerance) for r in rs]
               for subset, rs in runs.items()}
    return SelectionState(subflows, samples, dict(failures or {}), **settings)


def p99_view(mean: float, low: float, high: float) -> dict[str, float | bool | None]:
    """A subset's score (mean and interval) read as frame delay: the p99 of its mean score, its
    interval (the score's inverted: a high score is a low delay), whether its runs carried."""
    carried = score_carries(mean)
    return {"carries": carried, "p99_ms": p99_of_score(mean),
            "p99_low_ms": p99_of_score(high) if math.isfinite(high) else None,
            "p99_high_ms": p99_of_score(low) if carried else None}


def estimate_p99(e: SubsetEstimate) -> dict[str, float | bool | None]:
    """`p99_view` of a subset's estimate."""
    return p99_view(e.mean_mbps, e.low_mbps, e.high_mbps)


#: how an answer and the dashboard name what the stream selection weighed
METRIC = "p99_frame_delay"


def delay_view(result: SelectionResult, rate_mbps: float) -> SelectionResult:
    """A stream selection's result read as frame delay, as it is stored: every estimate of SP*
    and of its path gains its p99 and interval (ms) and whether it carried, every gain the
    change of p99 (−0.2: 20 % lower), both from the figures as stored (6 decimals); the result
    says what was weighed and why a subflow is kept."""
    def estimate(e: SubsetEstimate | None) -> SubsetEstimate | None:
        if e is None:
            return None
        mean, low, high = (stored_figure(e.mean_mbps), stored_figure(e.low_mbps),
                           stored_figure(e.high_mbps))
        return replace(e, delay=True, **p99_view(
            mean, low or 0.0, high if high is not None else math.inf))

    def step(s: Step) -> Step:
        g = s.gain
        if g is not None:
            fraction = stored_figure(g.fraction)
            g = replace(g, delay=True,
                        p99_change=None if fraction is None else p99_change(fraction))
        return replace(s, estimate=estimate(s.estimate), gain=g)

    return replace(
        result, estimate=estimate(result.estimate), path=tuple(map(step, result.path)),
        contradicted=tuple(map(step, result.contradicted)), metric=METRIC,
        why=(f"paced probes of {rate_mbps:.3g} Mbit/s: a subflow is kept where it lowers the "
             "p99 frame delay by more than delta/2, or where the stream is not carried "
             "without it"))
