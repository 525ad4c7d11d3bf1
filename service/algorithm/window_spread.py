"""The spread of the rate inside probes, for the promise a fresh probe is held to.

The answer promises where one fresh probe of the chosen configuration lands, from the spread of
its runs' means (`adaptive.BulkDecision.prediction_half_width`). Two runs can agree by chance while
the rate inside each moves a lot: measured on an asymmetric pair of paths, the receiver held the
slow subflow's data and released it at once, so a run read 5.6, 5.6, 15.7 and 8.2 Mbit/s a
second, two runs' means agreed within 1 %, and a fresh probe that covered one more slow second
fell outside a promise drawn from those two means alone.

So the within-run spread is pooled over the runs at OBS (each run's intervals after its warm-up,
about its own mean) and turned into the half-width of one fresh probe's mean over as many
intervals as a run measured: t(dof) x sd / sqrt(m). It is added in quadrature to the run-to-run
half-width. A steady rate adds little (its sd is small); a bursty one widens the promise, and the
answer says why with `unsteady_rate_at_obs` when a run's rate never settled by the probes' own
steadiness rule (`probe_duration.steady_state`), judged on the intervals the promise counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from .probe_duration import DEFAULT_WINDOW, steady_state
from .stored_form import OTHER, PRESENT, StoredForm, number
from .student_t import t_critical

#: a (interval end s, Mbit/s) series, warm-up included, as the probes record it
Series = Sequence[tuple[float, float]]


@dataclass(frozen=True)
class WindowSpread(StoredForm):
    """The pooled within-run spread of the measured intervals of some runs; stored as it is (a
    sweep decision's `spread_at_obs`), with the half-width it adds at the decision's confidence
    (`at`). `dof` is not stored: a value read back has its half-width already."""

    interval_sd_mbps: float | None = None  #: pooled sd of one interval about its run's mean
    dof: int = 0  #: intervals pooled minus runs
    intervals_per_run: float | None = None  #: mean count of measured intervals in a run
    runs: int = 0
    unsteady_runs: int = 0  #: runs whose rate never settled (`probe_duration.steady_state`)
    half_width_mbps: float | None = None  #: `half_width` at the confidence given to `at`
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"interval_sd_mbps": number, "intervals_per_run": number,
                         "runs": number, "unsteady_runs": number, "half_width_mbps": number}

    def half_width(self, confidence: float) -> float | None:
        """Half-width of the interval of one fresh probe's mean that the within-run spread
        alone gives; None when too few intervals were measured to say."""
        if self.dof < 1 or not self.intervals_per_run or self.intervals_per_run <= 0:
            return None
        t = t_critical(confidence, self.dof)
        return t * self.interval_sd_mbps / math.sqrt(self.intervals_per_run)

    def at(self, confidence: float) -> WindowSpread:
        """The spread with its half-width at `confidence` (what a decision stores)."""
        return replace(self, half_width_mbps=self.half_width(confidence))

    @property
    def unsteady(self) -> bool:
        return bool(self.unsteady_runs)


MIN_JUDGED = 3  # measured intervals below which a run's steadiness is not judged


def _unsteady(measured: Series) -> bool:
    """The probes' steadiness rule over the intervals the promise counts (those after the
    warm-up), the window shortened to them when they are fewer: the slow start a warm-up left
    out is no reason to call a run's rate unsteady (every 5 s probe was, on a 5-interval window
    that began in slow start)."""
    if len(measured) < MIN_JUDGED:
        return False
    return not steady_state(measured, window=min(DEFAULT_WINDOW, len(measured))).settled


def window_spread(runs: Sequence[tuple[Series, Sequence[float]]]) -> WindowSpread | None:
    """Pool the spread of `runs`, each given as (its whole series, its measured values: the
    intervals after its warm-up). None when no run measured two intervals."""
    squares = 0.0
    pooled = used = 0
    counts = []
    unsteady = 0
    for series, measured in runs:
        values = [float(v) for v in measured]
        if len(values) < 2 or not all(map(math.isfinite, values)):
            continue
        mean = sum(values) / len(values)
        squares += sum((v - mean) ** 2 for v in values)
        pooled += len(values)
        used += 1
        counts.append(len(values))
        if _unsteady(list(series)[-len(values):]):
            unsteady += 1
    if used == 0:
        return None
    dof = pooled - used
    sd = math.sqrt(squares / dof) if dof > 0 else 0.0
    return WindowSpread(sd, dof, sum(counts) / len(counts), used, unsteady)


def combined_half_width(run_to_run: float | None, within: float | None) -> float | None:
    """The two half-widths added in quadrature (either alone where the other is unknown)."""
    parts = [h for h in (run_to_run, within) if h is not None]
    if not parts:
        return None
    if any(math.isinf(h) for h in parts):
        return math.inf
    return math.sqrt(sum(h * h for h in parts))
