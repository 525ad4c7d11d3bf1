"""Where a fresh probe of a stream answer lands: the p99 frame delay interval the answer states.

The answer's point has a few runs (3, `MIN_RUNS`), taken within the campaign; a user's fresh
probe is taken later, on a host whose load has moved meanwhile. So the interval is a
prediction interval for one fresh probe's p99, on the log scale (p99 spreads in proportion to
its level), from two parts:

- **the spread of one run** (`run_spread`): the sd of ln p99 about its point's mean, read at
  every point with two runs or more and pooled robustly (the median of the points' sds, each
  scaled by the median of its chi distribution so that the median estimates the sd itself, not
  less): p99 has outliers (shared.yaml, PCDC/reno at 0.094 MiB: 38, 576, 38, 47 ms), and one
  must not widen every answer's interval. The sweep's own noise model reads the median absolute
  deviation of 3 runs, which on normal draws is about 0.58 of the sd: right for ranking points
  (a contender is not made of one outlier), too narrow for a promise;
- **the host's drift** between the campaign and a fresh probe (`DRIFT_REL_SD`), which the
  campaign's runs of one point, taken minutes apart at most, do not see. Measured on this host
  (docs/testbed.md, the stream accuracy tables): the answer's fresh mean of 4 probes against
  its campaign mean of 3, seven runs on shared, uit-haw and stream-radio, differed by -6.5 to
  +7.9 % (RMS 4.6 %), where the runs' own spread (about 3 %) accounts for 2.3 %: a shift of
  about 4 % sd common to the fresh probes.

Half-width on ln p99: t(dof) x sqrt(sd^2 (1 + 1/n) + drift^2), at the answer's confidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from statistics import median, stdev

from .student_t import t_critical

#: the sd of ln p99 by which a fresh probe's level moves from the campaign's (module doc)
DRIFT_REL_SD = 0.04


def run_spread(points: Iterable[Sequence[float]]) -> tuple[float, int]:
    """(sd of one run's ln p99, its degrees of freedom) over the points' p99s (ms), each point's
    runs about their own mean; (0, 0) when no point has two positive runs."""
    from scipy import stats  # here: scipy.stats costs every CLI start half a second

    scaled, dof = [], 0
    for values in points:
        logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
        if len(logs) < 2:
            continue
        k = len(logs) - 1
        # s / sd has the median sqrt(median(chi2_k) / k): divided by it, each point's s is a
        # median-unbiased reading of the sd, and the median over points stays one
        scaled.append(stdev(logs) / math.sqrt(float(stats.chi2.median(k)) / k))
        dof += k
    return (median(scaled), dof) if scaled else (0.0, 0)


def fresh_p99_half_width(mean_ms: float, n: int, spread: tuple[float, int], confidence: float,
                         drift: float = DRIFT_REL_SD) -> float | None:
    """The half-width (ms) about `mean_ms`, the mean p99 of the answer's `n` runs, in which one
    fresh probe's p99 lands with `confidence`; the upper side of the log-scale interval, taken
    on both sides (the lower side of exp(-h) is narrower, so the interval only widens). None
    when no spread is known (no point with two runs)."""
    sd, dof = spread
    if n < 1 or dof < 1 or not math.isfinite(mean_ms) or mean_ms <= 0:
        return None
    if not 0 < confidence < 1 or drift < 0:
        raise ValueError("0 < confidence < 1 and drift >= 0")

    t = t_critical(confidence, dof)
    h = t * math.sqrt(sd * sd * (1 + 1 / n) + drift * drift)
    return mean_ms * (math.exp(h) - 1)
