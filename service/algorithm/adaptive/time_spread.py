"""The answer's runs spread in time before the sweep calls it settled.

The decision settles once its answer's point (chosen arm at OBS) has `MIN_RUNS` runs; the
sweep often takes them back to back, seconds apart, so both can fall in one phase of a path
whose capacity or competition changes (field-lte.yaml: two runs at OBS read 9.67 Mbit/s on
average in the LTE uplink's fast phase, the answer's fresh probes 1.9-9.2). `spread_wanted`
holds the settled decision back until the answer's runs span at least `SETTLE_SPAN_S` from the
first run's start to the last one's, and, where the campaign's runs show the path varies
(`variation.path_variation`), until it has `VARYING_RUNS` runs spanning `VARYING_SPAN_S`, up to
`VARYING_MAX_RUNS` runs at that point (the probe cost stays bounded; the budget bounds it too).
While the answer's last run is the newest and the span is not reached, T*'s point, whose mean
draws the target and whose phase luck is the same, is repeated in between, up to its own limit:
a run of the answer taken right after the last one adds little time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .decision import T_STAR_MAX_RUNS

# Two runs of one configuration this far apart (starts) are not one phase of a path moving on
# the scale of the testbed's 40 s LTE cycle; on a quiet path it costs at most a repeat or two.
SETTLE_SPAN_S = 30.0
VARYING_RUNS = 4
VARYING_SPAN_S = 60.0
VARYING_MAX_RUNS = 6


@dataclass(frozen=True)
class SpreadNeed:
    """What the answer's point still needs: `runs` and `span_s` wanted, and what it has."""

    runs: int
    span_s: float
    have_runs: int
    have_span_s: float

    @property
    def met(self) -> bool:
        return self.have_runs >= self.runs and self.have_span_s >= self.span_s


def need(starts: Sequence[float], varies: bool, min_runs: int) -> SpreadNeed:
    """The runs and the span the answer's point (its runs' start times, s) must reach."""
    span = (max(starts) - min(starts)) if starts else 0.0
    if varies:
        return SpreadNeed(max(min_runs, VARYING_RUNS), VARYING_SPAN_S, len(starts), span)
    return SpreadNeed(min_runs, SETTLE_SPAN_S, len(starts), span)


def spread_wanted(answer_starts: Sequence[float], t_star_starts: Sequence[float],
                  others_newest_s: float | None, varies: bool, min_runs: int,
                  same_point: bool) -> str | None:
    """Which point to probe before the decision may be called settled: "answer" (the chosen
    arm at OBS), "t_star" (T*'s point, to let time pass usefully) or None (settled).
    `others_newest_s`: the newest start of a run at any other point (None: none). The
    answer's runs are capped at `VARYING_MAX_RUNS` where the path varies, at `max(min_runs,
    2)` + 1 where it does not: more repeats of one point in one phase would not spread it."""
    wanted = need(answer_starts, varies, min_runs)
    cap = VARYING_MAX_RUNS if varies else max(min_runs, 2) + 1
    if wanted.met or len(answer_starts) >= cap:
        return None
    last_is_answer = bool(answer_starts) and (others_newest_s is None
                                              or max(answer_starts) > others_newest_s)
    if (last_is_answer and wanted.have_span_s < wanted.span_s and not same_point
            and len(t_star_starts) < T_STAR_MAX_RUNS):
        return "t_star"
    return "answer"
