"""Whether the path moves over time, read off the campaign's own repeated probes, and how much
one fresh probe of the answer can then read.

A steady path's runs of one configuration differ about as much as the rate inside a run says
they should: a run's mean over m intervals has a spread of about sd_within / sqrt(m). A path
whose capacity or competition changes over tens of seconds puts runs taken at different times
in different phases, and their means differ far more than that (field-lte.yaml: the LTE
uplink's 40 s cycle between 1.5 and 10 Mbit/s spread one configuration's 6 s probes over
1.9-11.8 Mbit/s, while the rate inside one probe mostly held).

`path_variation` pools, over every point (arm, buffer) with two runs or more, the runs' spread
about their point's mean and the spread inside runs about each run's own mean, both relative to
the point's mean so that points at different rates pool; the path *varies* when the first
exceeds what the second expects (F-test at `VARIES_CONFIDENCE`) and by a material amount (the
runs' relative spread at least `delta`: a path whose probes move by less than the answer's own
tolerance is not one to warn about). The figures a user reads are those of the answer's
configuration: its runs' range and, over time, the 10th and 90th percentiles of its 1 s
goodputs (`Variation`). `fresh_probe_range` widens the answer's interval where the path varies:
a prediction interval for one fresh probe, drawn from the runs' spread over time, never narrower
than what the answer's own runs read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, quantiles
from typing import Any, ClassVar

from ..stored_form import OTHER, PRESENT, StoredForm, flag, number

VARIES_CONFIDENCE = 0.99  # the F-test's level: a quiet path is called varying 1 time in 100
MIN_RUNS_JUDGED = 2  # a point's runs below this say nothing of the spread between runs


@dataclass(frozen=True)
class TimedRun:
    """One ok run: when it started (s, from any origin shared by the runs compared), its stored
    mean and the intervals after its warm-up that the mean is taken over."""

    start_s: float
    mean_mbps: float
    intervals: tuple[float, ...] = ()


#: the runs per point: (arm key, buffer MiB) -> runs
TimedPoints = Mapping[tuple[Any, float], Sequence[TimedRun]]


@dataclass(frozen=True)
class Variation(StoredForm):
    """How the path moved under the campaign's probes, and at the answer's configuration.

    Pooled over the campaign: `between_rel_sd`, the runs' relative spread about their point's
    mean (`between_dof`), and `expected_rel_sd`, what the rate inside runs expects of it
    (sd_within / sqrt(intervals per run)); `varies`: the first exceeds the second at
    `VARIES_CONFIDENCE` and is at least delta. At the answer's point: its runs, the time they
    span (`span_s`, first start to last), their means' range (`run_low_mbps`..`run_high_mbps`),
    and its 1 s goodputs' 10th and 90th percentiles over all its runs (`p10_mbps`, `p90_mbps`;
    `spread_mbps` = p90 - p10): the spread over time a user should expect of the rate.

    Stored as it is (a sweep decision's `variation`, an answer's `promise.variation`), `span_s`
    to a tenth of a second."""

    varies: bool = False
    between_rel_sd: float = 0.0
    between_dof: int = 0
    expected_rel_sd: float = 0.0
    runs: int = 0
    span_s: float = 0.0
    run_low_mbps: float | None = None
    run_high_mbps: float | None = None
    p10_mbps: float | None = None
    p90_mbps: float | None = None
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"varies": flag, "runs": number, "span_s": number,
                         "p10_mbps": number, "p90_mbps": number, "spread_mbps": number,
                         "run_low_mbps": number, "run_high_mbps": number,
                         "between_rel_sd": number, "between_dof": number,
                         "expected_rel_sd": number}
    DERIVED: ClassVar = frozenset({"spread_mbps"})
    WRITERS: ClassVar = {"span_s": lambda s: round(s, 1)}

    @property
    def spread_mbps(self) -> float | None:
        if self.p10_mbps is None or self.p90_mbps is None:
            return None
        return self.p90_mbps - self.p10_mbps


def _pooled(points: TimedPoints) -> tuple[float, int, float, int, float]:
    """(between ss, its dof, within ss, its dof, mean intervals per run), relative to each
    point's mean, over the points with `MIN_RUNS_JUDGED` runs or more."""
    between = within = 0.0
    b_dof = w_dof = 0
    counts: list[int] = []
    for runs in points.values():
        ok = [r for r in runs if math.isfinite(r.mean_mbps)]
        if len(ok) < MIN_RUNS_JUDGED:
            continue
        centre = fmean(r.mean_mbps for r in ok)
        if centre <= 0:
            continue
        between += sum(((r.mean_mbps - centre) / centre) ** 2 for r in ok)
        b_dof += len(ok) - 1
        for r in ok:
            values = [v for v in r.intervals if math.isfinite(v)]
            if len(values) < 2:
                continue
            own = fmean(values)
            within += sum(((v - own) / centre) ** 2 for v in values)
            w_dof += len(values) - 1
            counts.append(len(values))
    per_run = fmean(counts) if counts else 0.0
    return between, b_dof, within, w_dof, per_run


def _varies(between_var: float, b_dof: int, expected_var: float, w_dof: int,
            delta: float) -> bool:
    if b_dof < 1 or math.sqrt(between_var) < delta:
        return False
    if w_dof < 1 or expected_var <= 0:
        return True  # runs that differ by delta or more with no spread inside them to excuse it
    from scipy import stats  # here: scipy.stats costs every CLI start half a second

    return between_var / expected_var > float(stats.f.ppf(VARIES_CONFIDENCE, b_dof, w_dof))


def path_variation(points: TimedPoints, answer: Sequence[TimedRun], delta: float) -> Variation:
    """The campaign's runs per point (`points`) judged for movement over time, and the figures
    of the answer's point (`answer`, its runs)."""
    between, b_dof, within, w_dof, per_run = _pooled(points)
    between_var = between / b_dof if b_dof else 0.0
    within_var = within / w_dof if w_dof else 0.0
    expected_var = within_var / per_run if per_run else 0.0
    means = [r.mean_mbps for r in answer if math.isfinite(r.mean_mbps)]
    seconds = sorted(v for r in answer for v in r.intervals if math.isfinite(v))
    p10 = p90 = None
    if len(seconds) >= 2:
        cuts = quantiles(seconds, n=10, method="inclusive")
        p10, p90 = cuts[0], cuts[-1]
    starts = [r.start_s for r in answer]
    return Variation(
        varies=_varies(between_var, b_dof, expected_var, w_dof, delta),
        between_rel_sd=math.sqrt(between_var), between_dof=b_dof,
        expected_rel_sd=math.sqrt(expected_var),
        runs=len(means), span_s=(max(starts) - min(starts)) if starts else 0.0,
        run_low_mbps=min(means) if means else None, run_high_mbps=max(means) if means else None,
        p10_mbps=p10, p90_mbps=p90,
    )


def fresh_probe_range(variation: Variation, otp_mbps: float, runs: int,
                      confidence: float) -> tuple[float, float] | None:
    """Where fresh probes of the answer should land on a varying path: a tolerance interval,
    OTP +- k x (the runs' relative spread over time x OTP), k by Howe's approximation so that
    `confidence` of fresh probes land inside with `confidence` (the spread over time is read
    off a few dozen runs, OTP off the answer's `runs`: a prediction interval on these
    estimates alone covered 68-100 % of fresh probes on a simulated 40 s LTE cycle, this one
    covers 90 % or more). At least the range the answer's own runs read. None on a path that
    does not vary (the quiet path's promise stands)."""
    if not variation.varies or runs < 1 or variation.between_dof < 1:
        return None
    from scipy import stats

    dof = variation.between_dof
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    k = z * math.sqrt(dof * (1 + 1 / runs) / float(stats.chi2.ppf(1 - confidence, dof)))
    half = k * variation.between_rel_sd * otp_mbps
    low, high = otp_mbps - half, otp_mbps + half
    if variation.run_low_mbps is not None and variation.run_high_mbps is not None:
        low, high = min(low, variation.run_low_mbps), max(high, variation.run_high_mbps)
    return max(0.0, low), high
