"""Eq. 5-6 over several runs: Omega with a t-based confidence interval, SP* on settled signs.

Runs vary a lot across the day (Section 4), so one Omega near 0 says little about its sign. Each
run gives one Omega_i per subflow (Eq. 5); over n runs the mean and a Student-t interval
mean +- t_{(1+level)/2, n-1} * s / sqrt(n) follow. A sign is *settled* when the interval excludes
0. SP* (Eq. 6) is taken from the means, and every subflow whose sign is not settled is listed, with
the number of runs that would likely settle it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .impact import ImpactResult, impact_factor, pcdc_subset
from .student_t import t_critical

DEFAULT_CONFIDENCE = 0.95

# One run of the impact phase: TP_0 and, per subflow i, TP_i; each a series (Mbit/s per second)
# or already a mean (a single float).
Throughput = float | Sequence[float]


@dataclass(frozen=True)
class ImpactRun:
    tp0_mbps: Throughput
    excluded_mbps: Mapping[str, Throughput]


@dataclass(frozen=True)
class OmegaEstimate:
    subflow: str
    omegas: list[float]  # one per run
    mean: float
    ci_low: float | None  # None: undefined (fewer than 2 runs)
    ci_high: float | None
    confidence: float
    settled: bool  # the interval excludes 0: the sign of Omega is known
    reason: str

    @property
    def runs(self) -> int:
        return len(self.omegas)


@dataclass(frozen=True)
class ConfidentImpact:
    """Per CC: Omega estimates, SP* from the means, and what stayed unsettled."""

    cc: str
    estimates: dict[str, OmegaEstimate]
    subset: list[str]
    subflows: list[str]  # SP, the topology's subflows
    confidence: float

    @property
    def omegas(self) -> dict[str, float]:
        return {name: e.mean for name, e in self.estimates.items()}

    @property
    def unsettled(self) -> list[str]:
        return [name for name, e in self.estimates.items() if not e.settled]

    @property
    def unmeasured(self) -> list[str]:
        return [name for name in self.subflows if name not in self.estimates]

    @property
    def same_as_fullmesh(self) -> bool:
        return set(self.subset) == set(self.subflows)

    def to_impact_result(self) -> ImpactResult:
        """The mean Omegas as the single-run result the rest of the service already stores."""
        return ImpactResult(self.cc, self.omegas, list(self.subset), list(self.subflows))


def _as_series(value: Throughput) -> list[float]:
    return [float(value)] if isinstance(value, int | float) else [float(v) for v in value]


def omegas_per_run(runs: Sequence[ImpactRun]) -> dict[str, list[float]]:
    """Eq. 5 in every run: subflow -> [Omega_i of run 1, run 2, ...] (runs without i skip it)."""
    out: dict[str, list[float]] = {}
    for k, run in enumerate(runs):
        tp0 = _as_series(run.tp0_mbps)
        for name, tpi in run.excluded_mbps.items():
            try:
                out.setdefault(name, []).append(impact_factor(tp0, _as_series(tpi)))
            except ValueError as exc:
                raise ValueError(f"runs[{k}].{name}: {exc}") from exc
    return out


def omega_estimate(
    subflow: str, omegas: Sequence[float], confidence: float = DEFAULT_CONFIDENCE
) -> OmegaEstimate:
    """Mean Omega and its Student-t confidence interval; settled iff the interval excludes 0."""
    _check_confidence(confidence)
    values = [float(v) for v in omegas]
    if not values:
        raise ValueError(f"{subflow}: no runs")
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return OmegaEstimate(
            subflow,
            values,
            mean,
            None,
            None,
            confidence,
            False,
            "one run: no confidence interval, sign unsettled",
        )
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_critical(confidence, n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    settled = low > 0 or high < 0
    reason = (
        f"CI excludes 0 ({'helps' if mean > 0 else 'harms'})"
        if settled
        else f"CI [{low:.3g}, {high:.3g}] contains 0"
    )
    return OmegaEstimate(subflow, values, mean, low, high, confidence, settled, reason)


def impact_with_confidence(
    cc: str,
    runs: Sequence[ImpactRun],
    subflows: Sequence[str],
    confidence: float = DEFAULT_CONFIDENCE,
) -> ConfidentImpact:
    """Omega per subflow over the runs, SP* (Eq. 6) from the mean Omegas, unsettled ones listed."""
    per_run = omegas_per_run(runs)
    stray = [name for name in per_run if name not in set(subflows)]
    if stray:
        raise ValueError(f"runs: {stray[0]} is not a subflow of the topology")
    if not per_run:
        raise ValueError("runs: no impact factor measured")
    estimates = {
        name: omega_estimate(name, per_run[name], confidence)
        for name in subflows
        if name in per_run
    }
    subset = pcdc_subset({name: e.mean for name, e in estimates.items()})
    return ConfidentImpact(cc, estimates, subset, list(subflows), confidence)


def runs_to_settle(
    estimate: OmegaEstimate, max_runs: int, confidence: float | None = None
) -> int | None:
    """Total runs that would likely settle this sign (same mean and spread), capped by max_runs.

    0 if already settled; None if even max_runs would not (or the spread is unknown with one run:
    then one more run is asked for, which gives a spread). Solves t_{n-1} * s / sqrt(n) < |mean|.
    """
    level = estimate.confidence if confidence is None else confidence
    if estimate.settled:
        return 0
    n = estimate.runs
    if n < 2:
        return 2 if max_runs >= 2 else None
    mean = abs(estimate.mean)
    sd = (estimate.ci_high - estimate.ci_low) / 2 * math.sqrt(n)
    sd /= t_critical(estimate.confidence, n - 1)
    for total in range(n + 1, max_runs + 1):
        if t_critical(level, total - 1) * sd / math.sqrt(total) < mean:
            return total
    return None


def subflows_needing_runs(result: ConfidentImpact, max_runs: int) -> dict[str, int | None]:
    """Unsettled subflow -> total runs that would likely settle it (None: not within max_runs)."""
    return {name: runs_to_settle(result.estimates[name], max_runs) for name in result.unsettled}


def _check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, int | float) and 0 < confidence < 1):
        raise ValueError(f"confidence: must be in (0, 1), got {confidence!r}")
