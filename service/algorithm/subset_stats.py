"""Intervals for the goodput of subflow subsets and for the gain of one subset over another.

Why this spread, and not plain Welch or plain pooling: goodput noise is multiplicative and far
from equal across subsets. On the recorded asymmetric campaign (tests/data) the coefficient of
variation of one point ranges from 0.1 % (one subflow at its link's cap) to 80 % (a run that
stalled at 0.0 beside three at 2-5 Mbit/s); at SRL-HU the same all-subflows probe gave 0.32 and
3.38 Mbit/s. So:

* the work is done on log goodput (a relative spread: a 5 % wobble at 18 Mbit/s and at
  0.14 Mbit/s is the same wobble), with goodputs floored at `FLOOR_MBPS`;
* a subset's variance is the larger of its own (n - 1 degrees of freedom) and the *pooled*
  variance of every subset in the same selection. The pooled part stops a 2-run subset whose two
  runs happen to agree (a capped link) from claiming certainty; the own part stops an erratic
  subset from hiding behind the quiet ones. The pooled variance is the median of the subsets'
  variances, each scaled by its chi-square median (an unbiased median for normal noise), so
  one erratic subset (a stalled run, a slow start at 300 ms RTT) does not inflate every other
  interval;
* the gain's interval is Welch's: t with the Welch-Satterthwaite degrees of freedom, each side
  counted with the degrees of freedom of the variance it used (own: n - 1, pooled: the sum).
Intervals are returned in Mbit/s (a subset's mean times exp(±h)) and the gain as a fraction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import fmean, median
from typing import Any, ClassVar

from .stored_form import OTHER, PRESENT, StoredForm, count, flag, names, number
from .student_t import t_critical

FLOOR_MBPS = 1e-3  # 1 kbit/s: a stalled run counts as this, so its logarithm is finite

Subset = frozenset[str]


@dataclass(frozen=True)
class Spread:
    """The pooled variance of log goodput over a selection's subsets, and its degrees of freedom
    (0: no subset has two runs yet)."""

    variance: float
    dof: int


#: the stream selection's reading of an estimate as frame delay (`selection_stream.delay_view`)
DELAY_VIEW = ("carries", "p99_ms", "p99_low_ms", "p99_high_ms")


def stored_figure(x: float | None) -> float | None:
    """A figure as a selection stores it: 6 decimals, and None where it is not finite."""
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def _subset(value) -> Subset:
    return frozenset(names(value))


@dataclass(frozen=True)
class SubsetEstimate(StoredForm):
    """A subset's goodput over its runs: the mean, its interval (from the log spread: computed
    when built from runs), and for a stream selection the same read as frame delay
    (`DELAY_VIEW`, `delay`). Stored as it is (a selection's estimates): subset, runs and the
    figures, to 6 decimals; the log statistics are not (a value read back has its interval)."""

    subset: Subset = frozenset()
    runs: int = 0
    mean_mbps: float | None = None  # the arithmetic mean of the runs: what a user gets
    log_mean: float = math.nan
    log_variance: float = math.inf  # max(own, pooled); inf when unknown
    dof: float = 0.0  # of log_variance; 0 when unknown
    confidence: float = 0.9
    pooled: bool = False  # log_variance is the pooled one (its dof does not grow with runs)
    low_mbps: float | None = None
    high_mbps: float | None = None
    carries: bool | None = None
    p99_ms: float | None = None
    p99_low_ms: float | None = None
    p99_high_ms: float | None = None
    delay: bool = field(default=False, compare=False, repr=False)  # carries the delay view
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"subset": _subset, "runs": count, "mean_mbps": number,
                         "low_mbps": number, "high_mbps": number, "carries": flag,
                         "p99_ms": number, "p99_low_ms": number, "p99_high_ms": number}
    WRITERS: ClassVar = {"subset": sorted, "mean_mbps": stored_figure,
                         "low_mbps": stored_figure, "high_mbps": stored_figure}

    def __post_init__(self) -> None:
        # built from runs: the interval from the log spread (t at `confidence`)
        if self.present is None and self.low_mbps is None and math.isfinite(self.log_mean):
            h = self.half_width_log
            object.__setattr__(self, "low_mbps", self.mean_mbps * math.exp(-h))
            object.__setattr__(self, "high_mbps",
                               math.inf if math.isinf(h) else self.mean_mbps * math.exp(h))

    def _written(self, name: str) -> bool:
        return name not in DELAY_VIEW or self.delay

    @property
    def half_width_log(self) -> float:
        if self.runs == 0 or self.dof <= 0 or not math.isfinite(self.log_variance):
            return math.inf
        return t_critical(self.confidence, self.dof) * math.sqrt(self.log_variance / self.runs)

    def overlaps(self, other: SubsetEstimate) -> bool:
        """The two intervals share a point: the measurements do not tell them apart."""
        return self.low_mbps <= other.high_mbps and other.low_mbps <= self.high_mbps


@dataclass(frozen=True)
class Gain(StoredForm):
    """`better` against `base`: the ratio of the geometric means minus one, with its interval;
    `settled`: the interval excludes zero (the sign of the gain is known). Stored as it is (a
    selection step's gain): the fraction and its interval to 6 decimals, settled, and for a
    stream selection the change of p99 it stands for (`p99_change`, with `delay`)."""

    base: Subset = frozenset()
    better: Subset = frozenset()
    fraction: float | None = None
    low: float | None = None
    high: float | None = None
    mbps: float | None = None  # difference of the arithmetic means
    settled: bool | None = None
    p99_change: float | None = None
    delay: bool = field(default=False, compare=False, repr=False)  # carries the delay view
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"fraction": number, "low": number, "high": number, "settled": flag,
                         "p99_change": number}
    WRITERS: ClassVar = {"fraction": stored_figure, "low": stored_figure,
                         "high": stored_figure}

    def __post_init__(self) -> None:
        if self.present is None and self.settled is None and None not in (self.low, self.high):
            object.__setattr__(self, "settled", self.low > 0 or self.high < 0)

    def _written(self, name: str) -> bool:
        return name != "p99_change" or self.delay


def logs(values: Sequence[float]) -> list[float]:
    return [math.log(max(float(v), FLOOR_MBPS)) for v in values]


def pooled_spread(samples: Mapping[Subset, Sequence[float]]) -> Spread:
    scaled, dof = [], 0
    for values in samples.values():
        n = len(values)
        if n < 2:
            continue
        lv = logs(values)
        m = fmean(lv)
        var = sum((x - m) ** 2 for x in lv) / (n - 1)
        scaled.append(var / (_chi2_median(n - 1) / (n - 1)))
        dof += n - 1
    if not scaled:
        return Spread(math.inf, 0)
    return Spread(float(median(scaled)), dof)


def estimate(
    subset: Subset, values: Sequence[float], spread: Spread, confidence: float
) -> SubsetEstimate:
    n = len(values)
    if n == 0:
        raise ValueError(f"subset {sorted(subset)}: no runs")
    lv = logs(values)
    m = fmean(lv)
    own = sum((x - m) ** 2 for x in lv) / (n - 1) if n > 1 else -math.inf
    if spread.dof > 0 and spread.variance >= own:
        return SubsetEstimate(subset, n, fmean(values), m, spread.variance, float(spread.dof),
                              confidence, pooled=True)
    if n > 1:
        return SubsetEstimate(subset, n, fmean(values), m, own, float(n - 1), confidence)
    return SubsetEstimate(subset, n, fmean(values), m, math.inf, 0.0, confidence)


def gain(base: SubsetEstimate, better: SubsetEstimate) -> Gain:
    g = better.log_mean - base.log_mean
    h = _welch_half_width(base, better)
    low = -1.0 if math.isinf(h) else math.expm1(g - h)
    high = math.inf if math.isinf(h) else math.expm1(g + h)
    return Gain(base.subset, better.subset, math.expm1(g), low, high,
                better.mean_mbps - base.mean_mbps)


def extra_runs_to_settle(
    base: SubsetEstimate, better: SubsetEstimate, max_runs: int, min_gain: float = 0.0
) -> tuple[Subset, int] | None:
    """The subset to run once more, and the total extra runs after which the gain's interval
    would lie above `min_gain` if the means and variances stayed as they are; None when no runs
    within `max_runs` per subset would (or the gain is not above `min_gain`: then more runs
    cannot make it an addition). Each extra run goes to the side whose run shrinks the interval
    most."""
    g = better.log_mean - base.log_mean - math.log1p(min_gain)
    if g <= 0 or not (math.isfinite(base.log_variance) and math.isfinite(better.log_variance)):
        return None
    sides = {"base": base, "better": better}
    runs = {"base": base.runs, "better": better.runs}
    first = None
    for total in range(1, 2 * max_runs + 1):
        options = [k for k in sides if runs[k] < max_runs]
        if not options:
            return None
        pick = min(options, key=lambda k: _shrunk(sides, runs, k))
        runs[pick] += 1
        if first is None:
            first = sides[pick].subset
        if _half_width_with(sides, runs) < g:
            return first, total
    return None


def _shrunk(sides, runs, pick) -> float:
    trial = dict(runs)
    trial[pick] += 1
    return _half_width_with(sides, trial)


def _half_width_with(sides: Mapping[str, SubsetEstimate], runs: Mapping[str, int]) -> float:
    """Welch's half-width with `runs` per side; a side on its own variance gains a degree of
    freedom per extra run, a side on the pooled one keeps the pooled degrees of freedom."""
    a, b = sides["base"], sides["better"]

    def dof(e: SubsetEstimate, n: int) -> float:
        return e.dof if e.pooled else float(n - 1)

    return _welch(a.log_variance, runs["base"], dof(a, runs["base"]), b.log_variance,
                  runs["better"], dof(b, runs["better"]), a.confidence)


def _welch_half_width(a: SubsetEstimate, b: SubsetEstimate) -> float:
    return _welch(a.log_variance, a.runs, a.dof, b.log_variance, b.runs, b.dof, a.confidence)


def _welch(va, na, da, vb, nb, db, confidence) -> float:
    if min(na, nb) == 0 or min(da, db) <= 0 or not (math.isfinite(va) and math.isfinite(vb)):
        return math.inf
    ea, eb = va / na, vb / nb
    se2 = ea + eb
    if se2 == 0:
        return 0.0
    dof = se2**2 / (ea**2 / da + eb**2 / db)
    return t_critical(confidence, dof) * math.sqrt(se2)


@lru_cache(maxsize=64)
def _chi2_median(dof: int) -> float:
    from scipy import stats  # here, not at the top: half a second every CLI start would pay
    return float(stats.chi2.median(dof))
